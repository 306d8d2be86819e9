package cli_test

import (
	"bytes"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestBadInput: every bad input gets an error that names the problem, a
// non-zero exit code (3 only for refusals), nothing on stdout, and leaves
// the store exactly as it was.
func TestBadInput(t *testing.T) {
	t.Parallel()
	k := setup(t)
	cfg := filepath.Join(k.dir, "cfg")
	write(t, filepath.Join(cfg, "main.tf"), "resource \"terraform_data\" \"a\" {\n  input = \"a\"\n}\n")
	k.ok("state", "init", "prod")
	k.ok("state", "init", "other")
	applied := reULID.FindString(k.ok("plan", "--state", "prod", "-C", cfg))
	applyRun := reULID.FindString(k.ok("apply", applied))
	write(t, filepath.Join(cfg, "main.tf"), "resource \"terraform_data\" \"a\" {\n  input = \"b\"\n}\n")
	open := reULID.FindString(k.ok("plan", "--state", "prod", "-C", cfg))
	const unknown = "01J0000000000000000000000X"

	files := map[string]string{
		"not-a-state.json": `{"resources": []}`,
		"v3.tfstate":       `{"version": 3, "terraform_version": "0.11.14", "serial": 4, "lineage": "3f1e0c6a-5b5c-4a55-9d5e-2f3c1b7d9e01", "modules": []}`,
		"garbage.tfstate":  "\x00\x01garbage",
		"file":             "a regular file",
	}
	for name, content := range files {
		write(t, filepath.Join(k.dir, name), content)
	}
	// prod's own document: adopting it under another name would fork prod.
	prodDoc := filepath.Join(k.dir, "prod.tfstate")
	k.ok("state", "pull", "prod", "-o", prodDoc)
	withEnv := func(kv ...string) []string {
		return append(append([]string(nil), k.env...), kv...)
	}
	emptyDir := t.TempDir()
	noTerraform := []string{"PATH=" + emptyDir, "HOME=" + k.dir, "KL_STORE=" + k.store, "KL_ACTOR=alice"}
	withStore := func(store string) []string {
		return append(append([]string(nil), k.env...), "KL_STORE="+store)
	}
	// A mistyped store path: only kl state init creates a store.
	missing := filepath.Join(k.dir, "nonexistent", "dir", "kl.db")
	noStore := []string{"no Kilolock store at " + missing + " (KL_STORE)", `"kl state init NAME" creates one`}

	for name, tc := range map[string]struct {
		args  []string
		env   []string // nil: k.env
		stdin string
		want  []string // the error says each of these
		code  int      // exit code: 1 error, 3 refusal
	}{
		"apply of an unknown run":          {args: []string{"apply", unknown}, want: []string{"run " + unknown + " does not exist"}, code: 1},
		"run show of an unknown run":       {args: []string{"run", "show", unknown}, want: []string{"run " + unknown + " does not exist", "kl runs"}, code: 1},
		"why of an unknown run":            {args: []string{"why", unknown}, want: []string{"run " + unknown + " does not exist"}, code: 1},
		"since-plan of an unknown run":     {args: []string{"history", "--since-plan", unknown}, want: []string{"run " + unknown + " does not exist"}, code: 1},
		"apply of an apply run":            {args: []string{"apply", applyRun}, want: []string{"run " + applyRun + " is an apply run, not a plan", "apply its plan run " + applied}, code: 3},
		"apply of an applied plan":         {args: []string{"apply", applied}, want: []string{"plan run " + applied + " was already applied by run " + applyRun}, code: 3},
		"apply --state of another state":   {args: []string{"apply", open, "--state", "other"}, want: []string{"plan " + open + " belongs to state prod, not other"}, code: 3},
		"state init from a non-state JSON": {args: []string{"state", "init", "x", "--from", filepath.Join(k.dir, "not-a-state.json")}, want: []string{"not-a-state.json", "not a Terraform state", `no "version" field`}, code: 1},
		"state init from a v3 state":       {args: []string{"state", "init", "x", "--from", filepath.Join(k.dir, "v3.tfstate")}, want: []string{"v3.tfstate", "found state format version 3", "version 4 only"}, code: 1},
		"state init from garbage":          {args: []string{"state", "init", "x", "--from", filepath.Join(k.dir, "garbage.tfstate")}, want: []string{"garbage.tfstate", "not a Terraform state"}, code: 1},
		"state init from garbage on stdin": {args: []string{"state", "init", "x", "--from", "-"}, stdin: "{", want: []string{"reading state file stdin", "not a Terraform state"}, code: 1},
		"state init from a missing file":   {args: []string{"state", "init", "x", "--from", filepath.Join(k.dir, "nope.tfstate")}, want: []string{"reading " + filepath.Join(k.dir, "nope.tfstate"), "no such file"}, code: 1},
		"state init of an existing name":   {args: []string{"state", "init", "prod"}, want: []string{"creating state prod: a state of that name exists"}, code: 1},
		"state init of a bad name":         {args: []string{"state", "init", "bad name"}, want: []string{`state name "bad name": use 1-200 characters`, "ASCII letters"}, code: 1},
		"state init of a//b":               {args: []string{"state", "init", "a//b"}, want: []string{`state name "a//b"`, "single '/'"}, code: 1},
		"state init of a/../b":             {args: []string{"state", "init", "a/../b"}, want: []string{`state name "a/../b"`}, code: 1},
		"state init of a trailing slash":   {args: []string{"state", "init", "a/"}, want: []string{`state name "a/"`}, code: 1},
		"state init of a..":                {args: []string{"state", "init", "a.."}, want: []string{`state name "a.."`, "not ending in '.'"}, code: 1},
		"state init of prod's own state": {args: []string{"state", "init", "prod-copy", "--from", prodDoc},
			want: []string{"creating state prod-copy: state prod already has lineage", "adopting the same Terraform state twice would fork it; use prod"}, code: 1},
		"state pull of a missing serial":     {args: []string{"state", "pull", "prod", "--serial", "9"}, want: []string{"state prod has no version 9 (head is 1)"}, code: 1},
		"state pull --serial -3":             {args: []string{"state", "pull", "prod", "--serial", "-3"}, want: []string{"--serial -3: want a version serial, 0 or more"}, code: 1},
		"state pull --serial -1":             {args: []string{"state", "pull", "prod", "--serial", "-1"}, want: []string{"--serial -1: want a version serial, 0 or more"}, code: 1},
		"state output --serial -2":           {args: []string{"state", "output", "prod", "--serial", "-2"}, want: []string{"--serial -2: want a version serial, 0 or more"}, code: 1},
		"state rollback --to -2":             {args: []string{"state", "rollback", "prod", "--to", "-2", "--reason", "x"}, want: []string{"--to -2: want a version serial, 0 or more"}, code: 1},
		"plan on a missing state":            {args: []string{"plan", "--state", "nope", "-C", cfg}, want: []string{`state "nope" does not exist`, "kl state init nope"}, code: 1},
		"plan without --state":               {args: []string{"plan", "-C", cfg}, want: []string{`required flag(s) "state" not set`}, code: 1},
		"plan --target garbage":              {args: []string{"plan", "--state", "prod", "-C", cfg, "--target", "garbage"}, want: []string{`--target "garbage": want a resource, instance or module address`}, code: 1},
		"history with neither selector":      {args: []string{"history"}, want: []string{"history needs exactly one of --state NAME or --since-plan RUN; neither was given"}, code: 1},
		"history with both selectors":        {args: []string{"history", "--state", "prod", "--since-plan", open}, want: []string{"history needs exactly one of --state NAME or --since-plan RUN; both were given"}, code: 1},
		"history --limit 0":                  {args: []string{"history", "--state", "prod", "--limit", "0"}, want: []string{"--limit 0: want at least 1"}, code: 1},
		"history --limit -1":                 {args: []string{"history", "--state", "prod", "--limit", "-1"}, want: []string{"--limit -1: want at least 1"}, code: 1},
		"history --before -1":                {args: []string{"history", "--state", "prod", "--before", "-1"}, want: []string{"--before -1: want a serial, or 0 for a page from the head"}, code: 1},
		"runs --limit 0":                     {args: []string{"runs", "--limit", "0"}, want: []string{"--limit 0: want at least 1"}, code: 1},
		"plan --commit not hex":              {args: []string{"plan", "--state", "prod", "-C", cfg, "--commit", "zzz"}, want: []string{`--commit "zzz": want a commit SHA, 7 to 40 hexadecimal characters`}, code: 1},
		"plan --commit too long":             {args: []string{"plan", "--state", "prod", "-C", cfg, "--commit", strings.Repeat("a", 41)}, want: []string{"--commit", "7 to 40 hexadecimal"}, code: 1},
		"run discard of an apply run":        {args: []string{"run", "discard", applyRun}, want: []string{"run " + applyRun + " is an apply run: only plan runs can be discarded (its plan is " + applied + ")"}, code: 3},
		"KL_LEASE not a duration":            {args: []string{"runs"}, env: withEnv("KL_LEASE=banana"), want: []string{"KL_LEASE=banana: not a duration (e.g. 2m)"}, code: 1},
		"KL_LEASE 1ns":                       {args: []string{"runs"}, env: withEnv("KL_LEASE=1ns"), want: []string{"KL_LEASE=1ns: too short: use at least 3s (default 2m)", "every third of the lease"}, code: 1},
		"KL_LEASE 1ms":                       {args: []string{"runs"}, env: withEnv("KL_LEASE=1ms"), want: []string{"KL_LEASE=1ms: too short", "store round trip"}, code: 1},
		"KL_LEASE 0":                         {args: []string{"runs"}, env: withEnv("KL_LEASE=0"), want: []string{"KL_LEASE=0: too short"}, code: 1},
		"KL_LEASE negative":                  {args: []string{"runs"}, env: withEnv("KL_LEASE=-1s"), want: []string{"KL_LEASE=-1s: too short"}, code: 1},
		"KL_LEASE over a day":                {args: []string{"runs"}, env: withEnv("KL_LEASE=25h"), want: []string{"KL_LEASE=25h: too long: use at most 24h (default 2m)"}, code: 1},
		"KL_BACKEND_LOCK_TTL too short":      {args: []string{"runs"}, env: withEnv("KL_BACKEND_LOCK_TTL=5s"), want: []string{"KL_BACKEND_LOCK_TTL=5s: use 1m to 24h (default 1h)", "never renewed"}, code: 1},
		"KL_BACKEND_LOCK_TTL not a duration": {args: []string{"runs"}, env: withEnv("KL_BACKEND_LOCK_TTL=soon"), want: []string{"KL_BACKEND_LOCK_TTL=soon: not a duration"}, code: 1},
		"KL_RETENTION 0":                     {args: []string{"runs"}, env: withEnv("KL_RETENTION=0"), want: []string{"KL_RETENTION=0 is ambiguous: say off to keep closed plans' artifacts forever, or a positive retention such as 30d or 720h"}, code: 1},
		"KL_RETENTION not a duration":        {args: []string{"gc"}, env: withEnv("KL_RETENTION=monthly"), want: []string{"KL_RETENTION=monthly: want a positive Go duration (720h, 90m), a whole number of days (30d) or off"}, code: 1},
		"KL_RETENTION negative days":         {args: []string{"gc"}, env: withEnv("KL_RETENTION=-5d"), want: []string{"KL_RETENTION=-5d: want a whole number of days from 1 to 36500"}, code: 1},
		"KL_RETENTION fractional days":       {args: []string{"gc"}, env: withEnv("KL_RETENTION=1.5d"), want: []string{"KL_RETENTION=1.5d: want a whole number of days"}, code: 1},
		"KL_RETENTION negative duration":     {args: []string{"gc"}, env: withEnv("KL_RETENTION=-1h"), want: []string{"KL_RETENTION=-1h: want a positive Go duration"}, code: 1},
		"gc with an argument":                {args: []string{"gc", "now"}, want: []string{`unknown command "now" for "kl gc"`}, code: 1},
		"KL_LOG_LEVEL unknown":               {args: []string{"runs"}, env: withEnv("KL_LOG_LEVEL=verbose"), want: []string{"KL_LOG_LEVEL=verbose: use debug, info, warn or error"}, code: 1},
		"KL_KEEP_WORKDIRS not a boolean":     {args: []string{"runs"}, env: withEnv("KL_KEEP_WORKDIRS=maybe"), want: []string{"KL_KEEP_WORKDIRS=maybe: not a boolean (true or false)"}, code: 1},
		"KL_LEASE with a space":              {args: []string{"runs"}, env: withEnv("KL_LEASE=2 m"), want: []string{`KL_LEASE="2 m": not a duration`}, code: 1},
		"no terraform binary": {args: []string{"plan", "--state", "prod", "-C", cfg}, env: noTerraform,
			want: []string{"no terraform binary found", "KL_TERRAFORM", "terraform", "tofu", "make tools"}, code: 1},
		"store in an unwritable place": {args: []string{"runs"}, env: withStore(filepath.Join(k.dir, "file", "kl.db")),
			want: []string{"opening store " + filepath.Join(k.dir, "file", "kl.db"), "not a directory"}, code: 1},
		"state list of a missing store": {args: []string{"state", "list"}, env: withStore(missing), want: noStore, code: 1},
		"runs of a missing store":       {args: []string{"runs"}, env: withStore(missing), want: noStore, code: 1},
		"status of a missing store":     {args: []string{"status"}, env: withStore(missing), want: noStore, code: 1},
		"history of a missing store":    {args: []string{"history", "--state", "prod"}, env: withStore(missing), want: noStore, code: 1},
		"plan on a missing store":       {args: []string{"plan", "--state", "prod", "-C", cfg}, env: withStore(missing), want: noStore, code: 1},
		"apply on a missing store":      {args: []string{"apply", open}, env: withStore(missing), want: noStore, code: 1},
		"run show on a missing store":   {args: []string{"run", "show", open}, env: withStore(missing), want: noStore, code: 1},
		"state pull of a missing store": {args: []string{"state", "pull", "prod"}, env: withStore(missing), want: noStore, code: 1},
		"--store of a missing store": {args: []string{"runs", "--store", missing},
			want: []string{"no Kilolock store at " + missing + " (--store)", "kl state init NAME"}, code: 1},
		"sqlite:// of a missing store": {args: []string{"runs"}, env: withStore("sqlite://" + missing), want: noStore, code: 1},
		"blank store": {args: []string{"state", "init", "prod"}, env: withStore(" "),
			want: []string{"the store (--store or KL_STORE) is blank"}, code: 1},
		"store path with a trailing newline": {args: []string{"state", "init", "prod"}, env: withStore(filepath.Join(k.dir, "nl.db") + "\n"),
			want: []string{"starts or ends with a blank", "trailing newline pasted"}, code: 1},
		"Postgres:// in capitals is PostgreSQL": {args: []string{"runs"}, env: withStore("Postgres://kl:secret@127.0.0.1:1/kl?connect_timeout=1"),
			want: []string{"opening PostgreSQL store", "connecting to PostgreSQL at 127.0.0.1:1/kl"}, code: 1},
		"unknown store scheme": {args: []string{"runs"}, env: withStore("mysql://kl:secret@db/kl"),
			want: []string{"opening store mysql://kl:xxxxx@db/kl", "unknown store kind", "postgres://"}, code: 1},
		"unknown subcommand": {args: []string{"aply", open}, want: []string{`unknown command "aply" for "kl"`}, code: 1},
		// Free text is stored and printed later on everyone's terminal.
		"KL_ACTOR with control characters": {args: []string{"plan", "--state", "prod", "-C", cfg}, env: withEnv("KL_ACTOR=evil\nactor\x1b[31mRED"),
			want: []string{`KL_ACTOR="evil\nactor\x1b[31mRED": contains the control character U+000A`, "printable text"}, code: 1},
		"KL_ACTOR with an escape":       {args: []string{"runs"}, env: withEnv("KL_ACTOR=x\x1b[2J"), want: []string{`KL_ACTOR="x\x1b[2J": contains the control character U+001B`}, code: 1},
		"KL_ACTOR with a bidi override": {args: []string{"runs"}, env: withEnv("KL_ACTOR=bob\u202eevil"), want: []string{"KL_ACTOR=", "bidirectional control U+202E"}, code: 1},
		"KL_ACTOR too long":             {args: []string{"runs"}, env: withEnv("KL_ACTOR=" + strings.Repeat("a", 201)), want: []string{"KL_ACTOR=\"aaaa", "…\": too long: 201 characters, at most 200"}, code: 1},
		"KL_ACTOR not UTF-8":            {args: []string{"runs"}, env: withEnv("KL_ACTOR=b\xffb"), want: []string{`KL_ACTOR="b\xffb": not valid UTF-8`}, code: 1},
		"discard --reason with escapes": {args: []string{"run", "discard", open, "--reason", "old\x1b[31m"},
			want: []string{`--reason "old\x1b[31m": contains the control character U+001B`}, code: 1},
		"discard --reason with a newline": {args: []string{"run", "discard", open, "--reason", "a\nb"}, want: []string{`--reason "a\nb": contains the control character U+000A`}, code: 1},
		"discard --reason too long":       {args: []string{"run", "discard", open, "--reason", strings.Repeat("r", 1001)}, want: []string{"--reason", "too long: 1001 characters, at most 1000"}, code: 1},
		"plan -C with an escape":          {args: []string{"plan", "--state", "prod", "-C", cfg + "\x1b[1m"}, want: []string{"-C ", "contains the control character U+001B"}, code: 1},
		"plan --var-file with a newline":  {args: []string{"plan", "--state", "prod", "-C", cfg, "--var-file", "a\nb.tfvars"}, want: []string{`--var-file "a\nb.tfvars": contains the control character`}, code: 1},
		"plan --pr with an escape":        {args: []string{"plan", "--state", "prod", "-C", cfg, "--pr", "ac\x1bme/infra#1"}, want: []string{`--pr "ac\x1bme/infra#1": want OWNER/REPO#NUMBER`}, code: 1},
		"plan --pr actions outside Actions": {args: []string{"plan", "--state", "prod", "-C", cfg, "--pr", "actions"},
			want: []string{"--pr actions: GITHUB_REPOSITORY is not set", "pass --pr OWNER/REPO#N"}, code: 1},
		"runs --before garbage":     {args: []string{"runs", "--before", "garbage"}, want: []string{`--before "garbage": not a run id`}, code: 1},
		"runs --before a 27th char": {args: []string{"runs", "--before", unknown + "0"}, want: []string{"--before", "not a run id"}, code: 1},
		"runs --before not base32":  {args: []string{"runs", "--before", "01J000000000000000000000UU"}, want: []string{"not a run id"}, code: 1},
		"runs of an unknown state": {args: []string{"runs", "--state", "does/not/exist"},
			want: []string{`state "does/not/exist" does not exist (create it with ` + "`kl state init does/not/exist`)"}, code: 1},
		"status of an unknown state": {args: []string{"status", "--state", "nope"}, want: []string{`state "nope" does not exist`}, code: 1},
		"KL_TERRAFORM not terraform": {args: []string{"plan", "--state", "prod", "-C", cfg}, env: withEnv("KL_TERRAFORM=/bin/true"),
			want: []string{"KL_TERRAFORM=/bin/true is not Terraform or OpenTofu", "`/bin/true version -json` printed no version"}, code: 1},
		"KL_TERRAFORM failing": {args: []string{"plan", "--state", "prod", "-C", cfg}, env: withEnv("KL_TERRAFORM=/bin/false"),
			want: []string{"KL_TERRAFORM=/bin/false is not Terraform or OpenTofu", "failed: exit status 1"}, code: 1},
		"unknown flag":                      {args: []string{"apply", open, "--wiat", "1m"}, want: []string{"unknown flag: --wiat"}, code: 1},
		"apply --wait negative":             {args: []string{"apply", open, "--wait", "-5s"}, want: []string{"--wait -5s: negative", "use 0 to refuse at once"}, code: 1},
		"apply --state of an unknown state": {args: []string{"apply", open, "--state", "no/such"}, want: []string{`state "no/such" does not exist`}, code: 1},
		"apply --state of a bad name":       {args: []string{"apply", open, "--state", "Bad Name"}, want: []string{`state name "Bad Name": use 1-200 characters`}, code: 1},
		"plan --state of a bad name":        {args: []string{"plan", "--state", "Bad Name", "-C", cfg}, want: []string{`state name "Bad Name": use 1-200 characters`, "ASCII letters"}, code: 1},
		"history --state of a bad name":     {args: []string{"history", "--state", "Bad Name"}, want: []string{`state name "Bad Name"`}, code: 1},
		"plan -C of a missing directory": {args: []string{"plan", "--state", "prod", "-C", filepath.Join(k.dir, "nonexistent")},
			want: []string{`-C "` + filepath.Join(k.dir, "nonexistent") + `": no such directory`}, code: 1},
		"plan -C of a file": {args: []string{"plan", "--state", "prod", "-C", filepath.Join(k.dir, "file")},
			want: []string{"-C ", "not a directory"}, code: 1},
		"plan --var-file missing": {args: []string{"plan", "--state", "prod", "-C", cfg, "--var-file", "nope.tfvars"},
			want: []string{`--var-file "nope.tfvars": no such file (` + filepath.Join(cfg, "nope.tfvars") + ": a relative --var-file is relative to -C DIR)"}, code: 1},
		"plan --var-file a directory": {args: []string{"plan", "--state", "prod", "-C", cfg, "--var-file", k.dir},
			want: []string{"--var-file", "a directory, not a variables file"}, code: 1},
		"KL_ACTOR blank":                 {args: []string{"runs"}, env: withEnv("KL_ACTOR=   "), want: []string{`KL_ACTOR="   ": blank`}, code: 1},
		"KL_ACTOR with a leading space":  {args: []string{"runs"}, env: withEnv("KL_ACTOR= alice"), want: []string{`KL_ACTOR=" alice": begins or ends with a space`}, code: 1},
		"KL_ACTOR with a trailing space": {args: []string{"runs"}, env: withEnv("KL_ACTOR=alice "), want: []string{"begins or ends with a space"}, code: 1},
		"KL_ACTOR with a zero-width space": {args: []string{"runs"}, env: withEnv("KL_ACTOR=ali\u200bce"),
			want: []string{`KL_ACTOR="ali\u200bce": contains the invisible or unprintable character U+200B`}, code: 1},
		"KL_ACTOR with a line separator": {args: []string{"runs"}, env: withEnv("KL_ACTOR=a\u2028b"), want: []string{"line or paragraph separator U+2028"}, code: 1},
		"KL_ACTOR with a no-break space": {args: []string{"runs"}, env: withEnv("KL_ACTOR=a\u00a0b"), want: []string{"space character U+00A0: use the ASCII space"}, code: 1},
		"discard --reason blank":         {args: []string{"run", "discard", open, "--reason", "  "}, want: []string{`--reason "  ": blank`}, code: 1},
		"discard --reason with a zero-width joiner": {args: []string{"run", "discard", open, "--reason", "a\u200db"},
			want: []string{"--reason", "invisible or unprintable character U+200D"}, code: 1},
		"plan -C with a zero-width space": {args: []string{"plan", "--state", "prod", "-C", cfg + "\u200b"}, want: []string{"-C ", "U+200B"}, code: 1},
	} {
		t.Run(name, func(t *testing.T) {
			k := k.with(t)
			before := k.dump()
			r := k.runWith(tc.env, tc.stdin, tc.args...)
			if r.err == nil {
				t.Fatalf("kl %s succeeded; want an error", strings.Join(tc.args, " "))
			}
			msg := r.err.Error()
			t.Logf("kl: %s", msg)
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not say %q", msg, w)
				}
			}
			// main prints "kl: " before the error: the error must not
			// repeat it, nor say what was being done twice.
			if strings.HasPrefix(msg, "kl ") || strings.HasPrefix(msg, "kl:") {
				t.Errorf("error %q starts with the program name; main adds \"kl: \"", msg)
			}
			if strings.Count(msg, "opening store") > 1 {
				t.Errorf("error %q says \"opening store\" twice", msg)
			}
			clauses := strings.Split(msg, ": ")
			for i := 1; i < len(clauses); i++ {
				if clauses[i] == clauses[i-1] {
					t.Errorf("error %q says %q twice in a row", msg, clauses[i])
				}
			}
			for _, field := range []string{"Lease:", "LogLevel", "KeepWorkDirs"} {
				if strings.Contains(msg, field) {
					t.Errorf("error %q names the Go field %s, not the variable", msg, field)
				}
			}
			if strings.Contains(msg, "secret") {
				t.Errorf("error %q shows the store password", msg)
			}
			if r.code() != tc.code {
				t.Errorf("exit code %d, want %d (error %q)", r.code(), tc.code, msg)
			}
			if r.out != "" {
				t.Errorf("stdout: %q, want nothing", r.out)
			}
			if diff := cmp.Diff(before, k.dump()); diff != "" {
				t.Errorf("the store changed (-before +after):\n%s", diff)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(k.dir, "file", "kl.db")); err == nil {
		t.Error("a store was created under a regular file")
	}
	if _, err := os.Stat(filepath.Join(k.dir, "nonexistent")); err == nil {
		t.Error("a command other than kl state init created the directory of a missing store")
	}
}

// TestDamagedStoreRefusesWrites: a SQLite store with overwritten pages is
// refused by every command that writes (plan, state init, run discard,
// run recover), naming the damage and the backup, before anything is
// written; the file is left as it was.
func TestDamagedStoreRefusesWrites(t *testing.T) {
	t.Parallel()
	k := setup(t)
	k.ok("state", "init", "prod")
	db, err := sql.Open("sqlite", k.store)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE filler (n INTEGER PRIMARY KEY, pad TEXT);
		WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n+1 FROM c WHERE n < 3000)
		INSERT INTO filler SELECT n, printf('%0200d', n) FROM c`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	f, err := os.OpenFile(k.store, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := f.Stat()
	if _, err := f.WriteAt(bytes.Repeat([]byte{0xA5}, 4096), (fi.Size()/4096/2)*4096); err != nil {
		t.Fatal(err)
	}
	f.Close()
	before, err := os.ReadFile(k.store)
	if err != nil {
		t.Fatal(err)
	}
	cfg := t.TempDir()
	if err := os.WriteFile(filepath.Join(cfg, "main.tf"), []byte(`resource "terraform_data" "a" { input = "a" }`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"plan", "--state", "prod", "-C", cfg},
		{"state", "init", "other"},
		{"run", "discard", "01J2ZP0A11CE0000000000PLAN"},
		{"run", "recover", "01J2ZP0A11CE000000000APPLY"},
	} {
		r := k.run(args...)
		if r.err == nil || !strings.Contains(r.err.Error(), "is damaged") || !strings.Contains(r.err.Error(), "backup") {
			t.Errorf("kl %s on a damaged store: %v; want a refusal naming the damage and the backup", strings.Join(args, " "), r.err)
		}
	}
	if after, _ := os.ReadFile(k.store); !bytes.Equal(after, before) {
		t.Errorf("the damaged store was written to")
	}
}
