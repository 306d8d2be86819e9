variable "gate" { type = string }
variable "seed" { type = string }

resource "terraform_data" "svc" {
  input = var.seed
  lifecycle {
    precondition {
      condition     = var.gate == "open"
      error_message = "gate is closed"
    }
  }
}
