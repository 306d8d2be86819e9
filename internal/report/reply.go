package report

import "fmt"

// klbot's replies to comment commands that have no report of their own:
// the help, and the answers of `/kl why` and `/kl history` when there is
// nothing to explain. Each is a BotNotice (Notice renders it).

// HelpText is the reply to "/kl help" and to anything that does not parse.
const HelpText = "**klbot commands** (one per comment, on a line of its own):\n\n" +
	"| command | what it does |\n| --- | --- |\n" +
	"| `/kl plan [-p PROJECT] [-- OPTIONS]` | plan the projects this pull request touches (or PROJECT) at its head commit; OPTIONS are Terraform's `-destroy`, `-refresh-only`, `-refresh=false`, `-parallelism=N` (no `-var`: its value would be public) |\n" +
	"| `/kl apply [-p PROJECT]` | apply the open plan of every project (or PROJECT) of this pull request |\n" +
	"| `/kl why [RUN]` | why a run was allowed, waited or refused (default: this pull request's latest runs) |\n" +
	"| `/kl history [-p PROJECT]` | the recent versions of the project's state, with the run behind each |\n" +
	"| `/kl recover [-p PROJECT]` | commit what the Terraform of this pull request's crashed apply last wrote, and lift its fence |\n" +
	"| `/kl unfence [-p PROJECT] -- REASON` | lift the fence of this pull request's crashed apply without committing; REASON says what you checked on the real objects |\n" +
	"| `/kl help` | this text |\n\n" +
	"Planning, applying, recovering and unfencing need write permission on the repository; an apply needs the plan of the pull request's current head commit " +
	"and the requirements the project sets in kl.yaml (`apply_requirements`). Words are taken literally: no quoting, no shell.\n"

// Help is the reply to `/kl help`, or to a comment that does not parse:
// Problem says what was wrong with it (the command parser's words), ""
// for a help request.
type Help struct{ Problem string }

func (n Help) markdown(Options) string {
	if n.Problem == "" {
		return HelpText
	}
	return fmt.Sprintf("⚠️ klbot did not run this comment: %s.\n\n%s", n.Problem, HelpText)
}

// NotThisRepo answers `/kl why RUN` for a run that is not one of Repo's.
type NotThisRepo struct{ Run, Repo string }

func (n NotThisRepo) markdown(Options) string {
	return fmt.Sprintf("Run `%s` is not a run of %s.\n", n.Run, n.Repo)
}

// NoRunYet answers `/kl why` on a pull request without a Kilolock run.
type NoRunYet struct{}

func (NoRunYet) markdown(Options) string {
	return "This pull request has no Kilolock run yet: push a change to a project, or comment `/kl plan`.\n"
}

// NoProjectHere answers `/kl history [-p Project]` on a pull request that
// has no such project (Projects are the ones it has), or none at all
// (Project "").
type NoProjectHere struct {
	Project  string
	Projects []string
}

func (n NoProjectHere) markdown(Options) string {
	if n.Project == "" {
		return "This pull request has no project yet: push a change to a project, or comment `/kl plan`.\n"
	}
	return fmt.Sprintf("This pull request has no project %q (its projects: %s).\n", n.Project, codeListOr(n.Projects, "none yet"))
}
