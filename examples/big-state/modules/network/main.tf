variable "zones" { type = list(string) }
variable "routes" { type = number }
variable "cidr" { type = string }
variable "gateway_config" { type = string }
variable "rollout_seconds" { type = number }

locals {
  zone_set = toset(var.zones)
}

resource "terraform_data" "vpc" {
  input = { cidr = var.cidr }
}

resource "terraform_data" "subnet" {
  for_each = local.zone_set
  input = {
    vpc  = terraform_data.vpc.id
    zone = each.key
  }
}

resource "terraform_data" "route" {
  count = var.routes
  input = {
    vpc    = terraform_data.vpc.id
    subnet = terraform_data.subnet[var.zones[count.index % length(var.zones)]].id
    index  = count.index
  }
}

resource "terraform_data" "gateway" {
  input = {
    vpc    = terraform_data.vpc.id
    config = var.gateway_config
  }
}

# A gateway rollout is slow: replaced whenever the gateway config changes.
resource "terraform_data" "gateway_rollout" {
  triggers_replace = var.gateway_config
  input            = terraform_data.gateway.id

  provisioner "local-exec" {
    command = "sleep ${var.rollout_seconds}"
  }
}

output "subnet_ids" {
  value = [for z in var.zones : terraform_data.subnet[z].id]
}

output "gateway_id" {
  value = terraform_data.gateway.id
}
