variable "region" {
  default = "eu"
}

variable "unused" {
  default = "x"
}

locals {
  prefix = "kl-${var.region}"
}

resource "terraform_data" "base" {
  input = local.prefix
}

resource "terraform_data" "web" {
  count = 2
  input = "${terraform_data.base.output}-${count.index}"
}

module "app" {
  source = "./mod"
  name   = terraform_data.web[0].output
}

resource "terraform_data" "uses_app" {
  input = module.app.id
}

moved {
  from = terraform_data.old_base
  to   = terraform_data.base
}

output "web" {
  value = terraform_data.web[*].output
}
