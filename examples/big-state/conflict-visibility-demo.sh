#!/usr/bin/env bash
# Conflict visibility on one shared state, with real Terraform.
#
# Pull requests change one state of ~290 resource instances (examples/big-state). Each
# PR is a copy of the configuration plus one pr.auto.tfvars; "main" collects
# the tfvars of every PR that was applied, as a merge would.
#
#   (a) two plans with disjoint write sets, both applied; the second's
#       since-plan lists the first's version as independent, and its
#       allowed-because says why;
#   (b) a plan whose read set another run changed: re-planned against the head, intent
#       unchanged, and the re-plan applied (not the reviewed plan to its old snapshot), with
#       the marker and both plan digests in the version's provenance;
#   (c) a plan whose write set another run changed: refused, naming the
#       version, its run and the address;
#   (d) two applies contending for one address at the same time: one waits,
#       and the wait is recorded;
#   (e) kl history and kl run show telling that story;
#   (f) two PRs changing different keys of one for_each resource
#       (module.app.terraform_data.service["api"] and ["cart"]) applied at
#       once: write sets name instances (ADR 0065), neither waits, neither is
#       stale, and the head holds both; and at the end
#       `terraform plan` against `kl state pull` of the head reports no changes;
#   (g) the native lane (ADR 0069): a PR adding a resource in a file of its own is
#       planned from its changed file — only the closure's slice, with its closure
#       proof — applied with a validation re-plan and committed as a delta; a PR
#       changing only a .tfvars file falls back to the terraform lane, saying why.
#
# Usage: KL=path/to/kl conflict-visibility-demo.sh   (make demo sets KL)
set -euo pipefail

KL=${KL:-kl}
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=${DEMO_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/kl-demo.XXXXXX")}
export KL_STORE="$WORK/kl.db"
export KL_ACTOR=${KL_ACTOR:-demo}
STATE=acme/infra/prod
TF=${KL_TERRAFORM:-$(command -v terraform || command -v tofu || true)}
if [ -z "$TF" ]; then
  echo "demo: no terraform or tofu on PATH; run 'make tools' (or make demo, which does)" >&2
  exit 1
fi
# No ~/.terraformrc is needed: terraform_data is built in.
if [ -z "${TF_CLI_CONFIG_FILE:-}" ] || [ ! -e "${TF_CLI_CONFIG_FILE}" ]; then
  export TF_CLI_CONFIG_FILE=/dev/null
fi

# Bold headings only on a terminal that has them (a log gets plain text),
# and never with NO_COLOR (https://no-color.org), as kl itself.
bold=''; reset=''
if [ -t 1 ] && [ -n "${TERM:-}" ] && [ "$TERM" != dumb ] && [ -z "${NO_COLOR:-}" ]; then
  bold=$(tput bold 2>/dev/null || true); reset=$(tput sgr0 2>/dev/null || true)
fi
step() { printf '\n%s━━ %s%s\n' "$bold" "$*" "$reset"; }
show() { printf '%s$ %s%s\n' "$bold" "$*" "$reset"; "$@"; }
# ulid reads the first run id (a 26-character ULID) from stdin.
ulid() { grep -oE '[0-9A-HJKMNP-TV-Z]{26}' | head -n1; }

mkdir -p "$WORK"
copy_config() { mkdir -p "$2"; (cd "$1" && tar --exclude=.terraform --exclude='*.tfstate*' --exclude='.terraform.lock.hcl' -cf - .) | (cd "$2" && tar -xf -); }
copy_config "$HERE" "$WORK/main"
: > "$WORK/main/main.auto.tfvars"

# pr NAME 'var = value' …: a PR branch = main + its own tfvars.
pr() {
  local name=$1; shift
  rm -rf "$WORK/pr-$name"
  copy_config "$WORK/main" "$WORK/pr-$name"
  printf '%s\n' "$@" > "$WORK/pr-$name/pr.auto.tfvars"
}
# merge NAME: the PR's change lands on main (its tfvars, and any tiers/ file it added).
merge() {
  if [ -f "$WORK/pr-$1/pr.auto.tfvars" ]; then cat "$WORK/pr-$1/pr.auto.tfvars" >> "$WORK/main/main.auto.tfvars"; fi
  if [ -d "$WORK/pr-$1/tiers" ]; then mkdir -p "$WORK/main/tiers" && cp "$WORK/pr-$1/tiers/"* "$WORK/main/tiers/"; fi
}
# plan NAME: kl plan of the PR; prints the report, sets PLAN_<NAME>.
plan() {
  local name=$1 out
  printf '%s$ kl plan --state %s -C pr-%s%s\n' "$bold" "$STATE" "$name" "$reset"
  out=$("$KL" plan --state "$STATE" -C "$WORK/pr-$name")
  printf '%s\n' "$out"
  local var="PLAN_${name^^}"
  printf -v "${var//-/_}" '%s' "$(printf '%s\n' "$out" | ulid)"
}
apply() { show "$KL" apply "$@"; }

echo "Kilolock conflict-visibility demo"
echo "  work dir: $WORK    store: $KL_STORE    terraform: $TF ($("$TF" version | head -n1))"

step "Set up: an empty state, and the bootstrap PR that creates ~290 resource instances"
show "$KL" state init "$STATE"
pr bootstrap '# bootstrap: the configuration as it is'
plan bootstrap
apply "$PLAN_BOOTSTRAP" >/dev/null
echo "applied bootstrap: $("$KL" history --state "$STATE" --limit 1 | sed -n 4p)"
merge bootstrap

step "(a) Two PRs with disjoint write sets plan at the same head, and both apply"
pr app 'app_version = "1.1.0"'
pr db 'db_tier = "db.large"'
plan app
plan db
apply "$PLAN_APP"
merge app
echo
echo "PR db planned before PR app was applied. Its since-plan classifies app's version:"
show "$KL" history --since-plan "$PLAN_DB"
apply "$PLAN_DB"
merge db
# Its story: the allowed-because facts stored when it applied.
show "$KL" run show "$("$KL" runs --state "$STATE" --limit 1 | ulid)"

step "(b) A PR whose read set another run changes: re-planned, intent unchanged, the re-plan applied"
pr alarms 'alarm_threshold = 85'
plan alarms
echo "PR alarms reads module.app.terraform_data.service (its alarms are named after the services)."
echo "Meanwhile an operator replaces the api service (a credential rotation) from main:"
printf '%s$ kl plan --state %s -C main --replace '\''module.app.terraform_data.service["api"]'\''%s\n' "$bold" "$STATE" "$reset"
out=$("$KL" plan --state "$STATE" -C "$WORK/main" --replace 'module.app.terraform_data.service["api"]')
printf '%s\n' "$out"
PLAN_ROTATE=$(printf '%s\n' "$out" | ulid)
apply "$PLAN_ROTATE"
show "$KL" history --since-plan "$PLAN_ALARMS"
echo "Applying PR alarms re-plans it against the head. Its intent is unchanged, so Kilolock applies"
echo "the RE-PLAN, made against the head: nothing is computed from the rotated service's old id."
apply "$PLAN_ALARMS"
merge alarms

step "(c) Two PRs change the same DNS records: the second is refused as stale"
pr ttl-60 'dns_ttl = 60'
pr ttl-120 'dns_ttl = 120'
plan ttl-60
plan ttl-120
apply "$PLAN_TTL_120"
merge ttl-120
set +e
apply "$PLAN_TTL_60"
rc=$?
set -e
echo "(kl apply exited $rc: refused)"
REFUSED=$("$KL" runs --state "$STATE" --limit 1 | ulid)
show "$KL" run show "$REFUSED"

step "(d) Two applies contend at the same time: one waits, and the wait is recorded"
pr gateway 'gateway_config = "gw-v2"'
pr cidr 'network_cidr = "10.1.0.0/16"'
plan gateway
plan cidr
echo "PR gateway rolls out a new gateway (slow: a local-exec sleep stands in for the cloud API)"
echo "and reads the VPC while it does; PR cidr rewrites that VPC. Both apply at once:"
"$KL" apply "$PLAN_GATEWAY" > "$WORK/apply-gateway.out" 2>&1 &
gw_pid=$!
# Start the second apply once the first holds its reservations.
for _ in $(seq 1 200); do
  if "$KL" status --state "$STATE" | grep -q '^apply .*applying'; then break; fi
  sleep 0.1
done
"$KL" apply --wait 2m "$PLAN_CIDR" > "$WORK/apply-cidr.out" 2>&1 &
cidr_pid=$!
for _ in $(seq 1 200); do
  if "$KL" status --state "$STATE" | grep -q 'waits on'; then break; fi
  sleep 0.1
done
show "$KL" status --state "$STATE"
wait "$gw_pid"
wait "$cidr_pid"
merge gateway
merge cidr
echo "$ kl apply $PLAN_GATEWAY"; cat "$WORK/apply-gateway.out"
echo "$ kl apply --wait 2m $PLAN_CIDR"; cat "$WORK/apply-cidr.out"
CIDR=$("$KL" runs --state "$STATE" --limit 1 | ulid)
show "$KL" why "$CIDR"

step "(e) The story: history of the state, and one run in full"
show "$KL" history --state "$STATE"
show "$KL" run show "$CIDR"

step "(f) Two PRs change different keys of one for_each resource, and apply at once"
pr tier-api '# tier-api: tiers/api'
mkdir -p "$WORK/pr-tier-api/tiers" && echo premium > "$WORK/pr-tier-api/tiers/api"
pr tier-cart '# tier-cart: tiers/cart'
mkdir -p "$WORK/pr-tier-cart/tiers" && echo premium > "$WORK/pr-tier-cart/tiers/cart"
plan tier-api
plan tier-cart
echo "Each write set names one instance of module.app.terraform_data.service: the reservations do"
echo "not overlap. Both apply at once (no --wait: a conflict would refuse at once):"
"$KL" apply "$PLAN_TIER_API" > "$WORK/apply-tier-api.out" 2>&1 &
api_pid=$!
"$KL" apply "$PLAN_TIER_CART" > "$WORK/apply-tier-cart.out" 2>&1 &
cart_pid=$!
wait "$api_pid"
wait "$cart_pid"
merge tier-api
merge tier-cart
echo "$ kl apply $PLAN_TIER_API"; cat "$WORK/apply-tier-api.out"
echo "$ kl apply $PLAN_TIER_CART"; cat "$WORK/apply-tier-cart.out"
show "$KL" history --state "$STATE" --limit 2
show "$KL" why "$("$KL" runs --state "$STATE" --limit 1 | ulid)"

step "(g) The native lane: plan the change, not the state; and a fall-back with its reason"
pr audit '# audit: a new resource in audit.tf'
# It changes audit.tf only: no tfvars of its own (kl compares the PR's tree
# with main's, and a file that differs but is not listed falls back).
rm "$WORK/pr-audit/pr.auto.tfvars"
cat > "$WORK/pr-audit/audit.tf" <<'TF'
# A new resource in a file of its own: the native lane plans its closure only.
resource "terraform_data" "audit" {
  input = "audit of ${module.dns.zone_id}"
}
TF
printf '%s$ kl plan --state %s -C pr-audit --lane native --changed-file audit.tf --base-dir main%s\n' "$bold" "$STATE" "$reset"
out=$("$KL" plan --state "$STATE" -C "$WORK/pr-audit" --lane native --changed-file audit.tf --base-dir "$WORK/main")
printf '%s\n' "$out"
PLAN_AUDIT=$(printf '%s\n' "$out" | ulid)
if ! printf '%s\n' "$out" | grep -q 'lane *native .*proved sufficient'; then
  echo "FAILED: the native-lane plan of PR audit did not stay in the native lane" >&2
  exit 1
fi
echo "Applied with --validate: the terraform lane plans the whole configuration first and must agree"
echo "on the write set; the commit is a delta of the slice's changed entries:"
apply --validate "$PLAN_AUDIT"
cp "$WORK/pr-audit/audit.tf" "$WORK/main/"
merge audit
pr ingress 'ingress_rules = ["443", "8443"]'
printf '%s$ kl plan --state %s -C pr-ingress --lane native --changed-file pr.auto.tfvars --base-dir main%s\n' "$bold" "$STATE" "$reset"
out=$("$KL" plan --state "$STATE" -C "$WORK/pr-ingress" --lane native --changed-file pr.auto.tfvars --base-dir "$WORK/main")
printf '%s\n' "$out" | sed -n '1,8p'
if ! printf '%s\n' "$out" | grep -q 'lane *terraform — fell back from the native lane'; then
  echo "FAILED: the plan of a .tfvars change did not fall back to the terraform lane" >&2
  exit 1
fi
apply "$(printf '%s\n' "$out" | ulid)" | sed -n '1,3p'
merge ingress

step "Check: terraform plan of main (every applied PR merged) against kl state pull of the head"
"$KL" state pull "$STATE" -o "$WORK/head.tfstate"
check="$WORK/check"
copy_config "$WORK/main" "$check"
(
  cd "$check"
  export TF_DATA_DIR="$check/.terraform"
  "$TF" init -input=false -backend=false >/dev/null
  set +e
  "$TF" plan -input=false -lock=false -state="$WORK/head.tfstate" -detailed-exitcode -no-color > "$WORK/check-plan.out" 2>&1
  echo $? > "$WORK/check-plan.rc"
)
rc=$(cat "$WORK/check-plan.rc")
grep -E 'No changes|Plan:' "$WORK/check-plan.out" || true
if [ "$rc" != 0 ]; then
  echo "FAILED: terraform plan against the head reports changes (exit $rc); see $WORK/check-plan.out" >&2
  exit 1
fi
echo "terraform plan against the head: no changes. Every PR's change is in the head; none was lost."
echo
echo "Explore further: KL_STORE=$KL_STORE $KL runs"
