variable "services" { type = list(string) }
variable "tasks" { type = number }
variable "app_version" { type = string }
variable "service_tier" { type = string }
variable "db_endpoint" { type = string }
variable "subnet_ids" { type = list(string) }
variable "gateway_id" { type = string }
variable "ingress_rules" { type = list(string) }

resource "terraform_data" "service" {
  for_each = toset(var.services)
  input = {
    name = each.key
    # A PR may give one service its own tier: a file tiers/NAME in the root
    # module (the demo's case f: two PRs, two services, applied at once).
    tier   = fileexists("${path.root}/tiers/${each.key}") ? trimspace(file("${path.root}/tiers/${each.key}")) : var.service_tier
    subnet = var.subnet_ids[0]
  }
}

resource "terraform_data" "task" {
  count = var.tasks
  input = {
    service = var.services[count.index % length(var.services)]
    version = var.app_version
    db      = var.db_endpoint
  }
}

resource "terraform_data" "ingress" {
  input = {
    gateway = var.gateway_id
    rules   = var.ingress_rules
  }
}

output "service_ids" {
  value = { for k, s in terraform_data.service : k => s.id }
}
