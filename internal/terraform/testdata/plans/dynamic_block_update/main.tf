terraform {
  required_providers {
    nested = { source = "example.com/kilolock/nested", version = "0.1.0" }
  }
}

resource "terraform_data" "cidrs" { input = ["10.0.0.0/8", "192.168.0.0/16"] }
resource "terraform_data" "mode" { input = "strict" }
resource "terraform_data" "extra" { input = ["172.16.0.0/12"] }
resource "terraform_data" "edge_cidrs" { input = ["100.64.0.0/10"] }

# Only dynamic blocks: plan JSON's configuration lists neither.
resource "nested_group" "web" {
  name = var.web_name
  dynamic "ingress" {
    for_each = terraform_data.cidrs.output
    content {
      cidr = ingress.value
    }
  }
  dynamic "settings" {
    for_each = [terraform_data.mode.output]
    content {
      mode = settings.value
    }
  }
}

# A static block beside a dynamic one of the same type: plan JSON lists one
# ingress block, the planned value holds two.
resource "nested_group" "mixed" {
  name = var.mixed_name
  ingress {
    cidr = "127.0.0.1/32"
  }
  dynamic "ingress" {
    for_each = terraform_data.extra.output
    content {
      cidr = ingress.value
    }
  }
}

# Static blocks only: every planned block is listed.
resource "nested_group" "plain" {
  name = var.plain_name
  ingress {
    cidr = terraform_data.cidrs.output[0]
  }
  settings {
    mode = "open"
  }
}

module "edge" {
  source = "./modules/edge"
  cidrs  = terraform_data.edge_cidrs.output
  name   = var.edge_name
}

variable "web_name" { default = "web" }
variable "mixed_name" { default = "mixed" }
variable "plain_name" { default = "plain" }
variable "edge_name" { default = "edge" }
