variable "subnet_ids" { type = list(string) }
variable "tier" { type = string }
variable "replicas" { type = number }
variable "params" { type = number }

resource "terraform_data" "cluster" {
  input = {
    subnets = var.subnet_ids
  }
}

resource "terraform_data" "replica" {
  count = var.replicas
  input = {
    cluster = terraform_data.cluster.id
    tier    = var.tier
    subnet  = var.subnet_ids[count.index % length(var.subnet_ids)]
  }
}

resource "terraform_data" "param" {
  count = var.params
  input = {
    cluster = terraform_data.cluster.id
    name    = "param-${count.index}"
  }
}

output "endpoint" {
  value = "${terraform_data.cluster.id}.db.internal"
}
