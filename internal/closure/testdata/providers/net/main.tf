resource "aws_vpc" "v" {
  cidr_block = "10.0.0.0/16"
}

resource "aws_subnet" "s" {
  vpc_id = aws_vpc.v.id
}
