variable "domain" { type = string }
variable "ttl" { type = number }
variable "service_ids" { type = map(string) }

resource "terraform_data" "zone" {
  input = { domain = var.domain }
}

resource "terraform_data" "record" {
  for_each = var.service_ids
  input = {
    zone   = terraform_data.zone.id
    name   = "${each.key}.${var.domain}"
    target = each.value
    ttl    = var.ttl
  }
}

output "zone_id" {
  value = terraform_data.zone.id
}
