variable "zones" {
  type    = list(string)
  default = ["a", "b", "c", "d", "e", "f", "g", "h"]
}

variable "network_cidr" {
  type    = string
  default = "10.0.0.0/16"
}

variable "gateway_config" {
  type    = string
  default = "gw-v1"
}

variable "gateway_rollout_seconds" {
  description = "How long a gateway rollout takes (a local-exec sleep standing in for a slow cloud API)."
  type        = number
  default     = 4
}

variable "db_tier" {
  type    = string
  default = "db.small"
}

variable "services" {
  type = list(string)
  default = [
    "api", "auth", "billing", "cart", "catalog", "checkout", "email", "events", "frontend", "gateway",
    "inventory", "ledger", "notify", "orders", "payments", "reports", "search", "shipping", "tax", "users",
  ]
}

variable "app_version" {
  type    = string
  default = "1.0.0"
}

variable "service_tier" {
  type    = string
  default = "standard"
}

variable "ingress_rules" {
  type    = list(string)
  default = ["443"]
}

variable "domain" {
  type    = string
  default = "example.internal"
}

variable "dns_ttl" {
  type    = number
  default = 300
}

variable "alarm_threshold" {
  type    = number
  default = 80
}
