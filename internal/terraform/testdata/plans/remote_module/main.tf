resource "terraform_data" "zone" { input = "a" }

# A remote module: its directory exists only after `terraform init`
# (.terraform/modules), which a checkout does not have.
module "network" {
  source = "git::file:///tmp/kilolock-fixture/network"
  zone   = terraform_data.zone.output
}

resource "terraform_data" "app" {
  input = "${module.network.subnet}-${var.app_rev}"
}

variable "app_rev" { default = "1" }
