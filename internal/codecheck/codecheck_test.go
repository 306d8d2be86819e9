package codecheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// root is the repository root, from this package's directory.
const root = "../.."

// maxLines is the longest a production function may be (docs/style.md 5: split
// along the job).
const maxLines = 80

// testSupport are directories of production-looking code that only tests
// run: the store contract suite, the GitHub fake, the PostgreSQL harness.
var testSupport = []string{"internal/store/storetest", "internal/github/githubfake", "internal/store/pgtest"}

// productionFiles parses every non-test Go file of the repository outside
// testSupport and testdata.
func productionFiles(t *testing.T) (*token.FileSet, map[string]*ast.File) {
	t.Helper()
	fset := token.NewFileSet()
	files := map[string]*ast.File{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") && rel != "." {
				return filepath.SkipDir
			}
			for _, s := range testSupport {
				if rel == s {
					return filepath.SkipDir
				}
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			return err
		}
		files[rel] = f
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return fset, files
}

// TestFunctionLength: no production function is maxLines lines or longer.
func TestFunctionLength(t *testing.T) {
	t.Parallel()
	fset, files := productionFiles(t)
	for rel, f := range files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
			if n >= maxLines {
				t.Errorf("%s: %s is %d lines; split it along its steps (under %d)", rel, fd.Name.Name, n, maxLines)
			}
		}
	}
}

// wordsFields are the stored words a consumer must not read for meaning:
// Marker.Reason (a widening's words, a legacy marker's text) and
// End.Legacy (a legacy run's text). They may be printed, never inspected.
var wordsFields = map[string]bool{"Reason": true, "Legacy": true}

// inspecting are the functions that read text for meaning.
var inspecting = map[string]bool{
	"Contains": true, "HasPrefix": true, "HasSuffix": true, "Index": true, "LastIndex": true, "Cut": true,
	"CutPrefix": true, "CutSuffix": true, "TrimPrefix": true, "TrimSuffix": true, "Split": true, "SplitN": true,
	"Fields": true, "EqualFold": true, "Count": true, "MatchString": true, "FindString": true, "FindAllStringIndex": true,
	"FindStringSubmatch": true, "ReplaceAllString": true,
}

// allowedReaders are the files that may read stored words: the engine
// (which writes them) and the store's row migration (which reads legacy
// reasons once to type them, store/row.go).
func allowedReader(rel string) bool {
	return strings.HasPrefix(rel, "internal/engine/") || rel == "internal/store/row.go"
}

// TestNoStoredWordsParsed: outside the engine and the row migration, no
// call of a strings or regexp function that inspects text takes a
// .Reason or .Legacy field, and no such field is compared with == or !=
// against a string literal. (Widening.Reason, the footprint extractor's
// own words, counts too: it is shown, not inspected.)
func TestNoStoredWordsParsed(t *testing.T) {
	t.Parallel()
	fset, files := productionFiles(t)
	for rel, f := range files {
		if allowedReader(rel) {
			continue
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.CallExpr:
				sel, ok := x.Fun.(*ast.SelectorExpr)
				if !ok || !inspecting[sel.Sel.Name] {
					return true
				}
				for _, a := range x.Args {
					if field := wordsField(a); field != "" {
						t.Errorf("%s: %s(…%s…) reads stored words for meaning; use the typed end (engine.End)", fset.Position(x.Pos()), sel.Sel.Name, field)
					}
				}
			case *ast.BinaryExpr:
				if x.Op != token.EQL && x.Op != token.NEQ {
					return true
				}
				for _, pair := range [][2]ast.Expr{{x.X, x.Y}, {x.Y, x.X}} {
					if lit, ok := pair[1].(*ast.BasicLit); ok && lit.Kind == token.STRING && lit.Value != `""` && wordsField(pair[0]) != "" {
						t.Errorf("%s: %s compared with %s reads stored words for meaning; use the typed end", fset.Position(x.Pos()), wordsField(pair[0]), lit.Value)
					}
				}
			}
			return true
		})
	}
}

// wordsField names the wordsFields selector e is (x.Reason), or "".
func wordsField(e ast.Expr) string {
	if sel, ok := e.(*ast.SelectorExpr); ok && wordsFields[sel.Sel.Name] {
		return "." + sel.Sel.Name
	}
	return ""
}

// TestChecksSeeViolations: the checks find what they look for (a check
// that finds nothing because it parses nothing would pass forever).
func TestChecksSeeViolations(t *testing.T) {
	t.Parallel()
	src := `package p
import "strings"
func f(m struct{ Reason string }) bool { return strings.HasPrefix(m.Reason, "discarded by ") || m.Reason == "x" }`
	f, err := parser.ParseFile(token.NewFileSet(), "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	ast.Inspect(f, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.CallExpr:
			if sel, ok := x.Fun.(*ast.SelectorExpr); ok && inspecting[sel.Sel.Name] && wordsField(x.Args[0]) != "" {
				found++
			}
		case *ast.BinaryExpr:
			if wordsField(x.X) != "" {
				found++
			}
		}
		return true
	})
	if found != 2 {
		t.Fatalf("found %d violations in the sample, want 2", found)
	}
	_, files := productionFiles(t)
	if len(files) < 100 || files["internal/engine/end.go"] == nil {
		t.Fatalf("parsed %d production files; want the whole repository, internal/engine/end.go among them", len(files))
	}
}
