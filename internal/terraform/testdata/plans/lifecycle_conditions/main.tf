resource "terraform_data" "limit" { input = 3 }
resource "terraform_data" "post" { input = "p" }
resource "terraform_data" "gate" { input = "open" }
resource "terraform_data" "trigger" { input = "t" }

# Plan JSON's configuration lists input only: not the conditions, not
# replace_triggered_by.
resource "terraform_data" "r" {
  input = var.r_input
  lifecycle {
    precondition {
      condition     = terraform_data.limit.output > 2
      error_message = "limit too low"
    }
    postcondition {
      condition     = terraform_data.post.output != ""
      error_message = "post is empty"
    }
    replace_triggered_by = [terraform_data.trigger]
  }
}

module "app" {
  source = "./modules/app"
  gate   = terraform_data.gate.output
  seed   = var.app_seed
}

output "r" {
  value = terraform_data.r.output
  precondition {
    condition     = terraform_data.gate.output == "open"
    error_message = "gate is closed"
  }
}

variable "r_input" { default = "x" }
variable "app_seed" { default = "s" }
