variable "name" {}

resource "terraform_data" "svc" {
  for_each = toset(["a", "b"])
  input    = "${var.name}-${each.key}"
}

resource "terraform_data" "side" {
  input = "side"
}

output "id" {
  value = terraform_data.svc["a"].id
}
