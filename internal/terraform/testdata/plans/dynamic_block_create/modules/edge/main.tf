terraform {
  required_providers {
    nested = { source = "example.com/kilolock/nested" }
  }
}

variable "cidrs" { type = list(string) }
variable "name" { type = string }

resource "nested_group" "this" {
  name = var.name
  dynamic "ingress" {
    for_each = var.cidrs
    content {
      cidr = ingress.value
    }
  }
}
