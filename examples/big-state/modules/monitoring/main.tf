variable "alarms" { type = number }
variable "threshold" { type = number }
variable "service_ids" { type = map(string) }

locals {
  service_names = sort(keys(var.service_ids))
}

resource "terraform_data" "dashboard" {
  input = { services = local.service_names }
}

resource "terraform_data" "alarm" {
  count = var.alarms
  input = {
    service   = local.service_names[count.index % length(local.service_names)]
    threshold = var.threshold
    dashboard = terraform_data.dashboard.id
  }
}
