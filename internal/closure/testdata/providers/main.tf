variable "region" {
  default = "eu-west-1"
}

variable "east_region" {
  default = "us-east-1"
}

provider "aws" {
  region = var.region
}

provider "aws" {
  alias  = "east"
  region = var.east_region
}

resource "aws_instance" "default" {
  ami = "a"
}

resource "aws_instance" "east" {
  provider = aws.east
  ami      = "b"
}

module "net" {
  source = "./net"
  providers = {
    aws = aws.east
  }
}

module "net_again" {
  source = "./net"
}

resource "terraform_data" "after_net" {
  depends_on = [module.net]
}
