# A shared-state Terraform configuration of a few hundred terraform_data
# resources in five modules with cross-module references. terraform_data is
# built into Terraform: no provider download is needed. Each "pull request"
# of conflict-visibility-demo.sh is this directory plus one *.auto.tfvars.

module "network" {
  source          = "./modules/network"
  zones           = var.zones
  routes          = 40
  cidr            = var.network_cidr
  gateway_config  = var.gateway_config
  rollout_seconds = var.gateway_rollout_seconds
}

module "db" {
  source     = "./modules/db"
  subnet_ids = module.network.subnet_ids
  tier       = var.db_tier
  replicas   = 20
  params     = 30
}

module "app" {
  source        = "./modules/app"
  services      = var.services
  tasks         = 60
  app_version   = var.app_version
  service_tier  = var.service_tier
  db_endpoint   = module.db.endpoint
  subnet_ids    = module.network.subnet_ids
  gateway_id    = module.network.gateway_id
  ingress_rules = var.ingress_rules
}

module "dns" {
  source      = "./modules/dns"
  domain      = var.domain
  ttl         = var.dns_ttl
  service_ids = module.app.service_ids
}

module "monitoring" {
  source      = "./modules/monitoring"
  alarms      = 80
  threshold   = var.alarm_threshold
  service_ids = module.app.service_ids
}

resource "terraform_data" "release" {
  input = {
    app_version = var.app_version
  }
}

output "app_release" {
  value = terraform_data.release.output
}

output "db_endpoint" {
  value = module.db.endpoint
}

output "zone_id" {
  value = module.dns.zone_id
}
