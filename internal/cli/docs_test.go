package cli

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// docCommand is a nerflow command line found in the documentation.
type docCommand struct {
	where string   // file:line
	args  []string // after the binary's name
	// inline commands come from `code spans` in prose, which often name a
	// command with a flag but not its value (`nerflow train --eval-every`):
	// their flags are checked by name only, their arguments not at all.
	inline bool
}

// The documentation's files whose command lines the test checks.
func docFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"../../README.md", "../../deploy/README.md"}
	more, err := filepath.Glob("../../docs/*.md")
	if err != nil || len(more) == 0 {
		t.Fatalf("no docs/*.md (%v)", err)
	}
	return append(files, more...)
}

var codeSpan = regexp.MustCompile("`([^`]+)`")

// docCommands finds every nerflow command line of a Markdown file: the
// lines of its fenced code blocks (with their continuation lines, and each
// command of a list such as `a; b && c | d`), and its code spans.
func docCommands(t *testing.T, path string) []docCommand {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rel := strings.TrimPrefix(path, "../../")
	var (
		out     []docCommand
		fence   string // the open fence's info string; "" outside blocks
		inBlock bool
		pending string // a code line continued with a backslash
		start   int
	)
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "```") {
			if inBlock {
				inBlock = false
			} else {
				inBlock, fence = true, strings.TrimSpace(strings.TrimPrefix(trimmed, "```"))
			}
			continue
		}
		if inBlock {
			switch fence {
			case "yaml", "json", "go", "promql", "ini", "systemd", "dockerfile":
				continue // no shell here
			}
			if pending == "" {
				start = n
			}
			if strings.HasSuffix(trimmed, `\`) {
				pending += strings.TrimSuffix(trimmed, `\`) + " "
				continue
			}
			text := strings.TrimPrefix(pending+trimmed, "$ ")
			pending = ""
			for _, words := range shellCommands(text) {
				if args, ok := nerflowArgs(words); ok {
					out = append(out, docCommand{where: rel + ":" + strconv.Itoa(start), args: args})
				}
			}
			continue
		}
		for _, m := range codeSpan.FindAllStringSubmatch(line, -1) {
			for _, words := range shellCommands(m[1]) {
				if args, ok := nerflowArgs(words); ok {
					out = append(out, docCommand{where: rel + ":" + strconv.Itoa(n), args: args, inline: true})
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// shellCommands splits a shell line into its simple commands' words, as
// sh would: quotes and backslashes, comments, and the operators ; & && ||
// | and redirections ending a command or dropping their target. $(...) and
// ${...} stay one word.
func shellCommands(line string) [][]string {
	var (
		cmds  [][]string
		words []string
		word  strings.Builder
		inWord,
		redirect bool // the next word is a redirection's target
	)
	endWord := func() {
		if inWord {
			if redirect {
				redirect = false
			} else {
				words = append(words, word.String())
			}
		}
		word.Reset()
		inWord = false
	}
	endCmd := func() {
		endWord()
		if len(words) > 0 {
			cmds = append(cmds, words)
		}
		words = nil
	}
	r := []rune(line)
	for i := 0; i < len(r); i++ {
		c := r[i]
		switch {
		case c == '\'':
			inWord = true
			j := i + 1
			for j < len(r) && r[j] != '\'' {
				word.WriteRune(r[j])
				j++
			}
			i = j
		case c == '"':
			inWord = true
			j := i + 1
			for j < len(r) && r[j] != '"' {
				if r[j] == '\\' && j+1 < len(r) {
					j++
				}
				word.WriteRune(r[j])
				j++
			}
			i = j
		case c == '\\' && i+1 < len(r):
			inWord = true
			i++
			word.WriteRune(r[i])
		case c == '$' && i+1 < len(r) && (r[i+1] == '(' || r[i+1] == '{'):
			inWord = true
			open, closing := r[i+1], map[rune]rune{'(': ')', '{': '}'}[r[i+1]]
			depth := 0
			for ; i < len(r); i++ {
				word.WriteRune(r[i])
				if r[i] == open {
					depth++
				} else if r[i] == closing {
					if depth--; depth == 0 {
						break
					}
				}
			}
		case c == '#' && !inWord:
			endCmd()
			return cmds
		case c == ' ' || c == '\t':
			endWord()
		case c == ';' || c == '|' || c == '&':
			endCmd()
		case c == '>' || c == '<':
			// 2>&1, >file, > file: the redirection and its target go.
			if inWord && isDigits(word.String()) {
				word.Reset()
				inWord = false
			}
			endWord()
			for i+1 < len(r) && (r[i+1] == '>' || r[i+1] == '&') {
				i++
			}
			if i+1 < len(r) && isDigitRune(r[i+1]) && r[i] == '&' {
				i++
				continue
			}
			redirect = true
		default:
			inWord = true
			word.WriteRune(c)
		}
	}
	endCmd()
	return cmds
}

func isDigitRune(c rune) bool { return c >= '0' && c <= '9' }

func isDigits(s string) bool {
	for _, c := range s {
		if !isDigitRune(c) {
			return false
		}
	}
	return s != ""
}

var assignment = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)

// nerflowArgs returns the arguments of a command whose program is nerflow
// (nerflow, bin/nerflow, ./bin/nerflow, ...), after any VAR=value prefix.
func nerflowArgs(words []string) ([]string, bool) {
	for len(words) > 0 && assignment.MatchString(words[0]) {
		words = words[1:]
	}
	if len(words) == 0 || filepath.Base(words[0]) != "nerflow" || strings.Contains(words[0], "$") {
		return nil, false
	}
	return words[1:], true
}

// checkDocCommand parses a documented command line with this binary's
// commands, as nerflow would parse it, without running anything.
func checkDocCommand(c docCommand) error {
	args := c.args
	elided := false
	for i := 0; i < len(args); i++ {
		if args[i] == "..." {
			// "nerflow train ... --layers 2": the reader fills in the rest.
			args, elided = append(args[:i:i], args[i+1:]...), true
			i--
		}
	}
	root := NewRoot()
	cmd, rest, err := root.Find(args)
	if err != nil {
		return err
	}
	if cmd == root {
		for _, a := range args {
			if !strings.HasPrefix(a, "-") {
				return fmt.Errorf("%q is not a nerflow command", a)
			}
		}
		if len(args) > 0 && args[0] != "--help" && args[0] != "-h" {
			return errors.New("no command (nerflow's own flags go with a command)")
		}
	}
	if cmd.HasSubCommands() && !cmd.Runnable() {
		for _, a := range rest {
			if !strings.HasPrefix(a, "-") {
				return fmt.Errorf("%q is not a subcommand of nerflow %s", a, cmd.Name())
			}
		}
	}
	if c.inline {
		return checkFlagNames(cmd, rest)
	}
	if err := cmd.ParseFlags(rest); err != nil {
		return fmt.Errorf("nerflow %s: %w", cmd.Name(), err)
	}
	if elided || cmd.Args == nil {
		return nil
	}
	if err := cmd.ValidateArgs(cmd.Flags().Args()); err != nil {
		return fmt.Errorf("nerflow %s: %w", cmd.Name(), err)
	}
	return nil
}

// checkFlagNames checks that every flag of an inline command exists.
func checkFlagNames(cmd *cobra.Command, rest []string) error {
	flags := pflag.NewFlagSet("all", pflag.ContinueOnError)
	flags.AddFlagSet(cmd.LocalFlags())
	flags.AddFlagSet(cmd.InheritedFlags())
	for _, a := range rest {
		if a == "--" {
			return nil
		}
		var f *pflag.Flag
		switch {
		case strings.HasPrefix(a, "--"):
			name, _, _ := strings.Cut(a[2:], "=")
			f = flags.Lookup(name)
		case strings.HasPrefix(a, "-") && len(a) > 1:
			f = flags.ShorthandLookup(a[1:2])
		default:
			continue
		}
		if f == nil && a != "--help" && a != "-h" {
			return fmt.Errorf("nerflow %s has no flag %s", cmd.Name(), a)
		}
	}
	return nil
}

// Every nerflow command line of the README and the docs parses with this
// binary's commands: each command exists, and each flag; in code blocks the
// flags' values and the number of arguments are right too.
func TestDocumentedCommandLines(t *testing.T) {
	total := 0
	for _, path := range docFiles(t) {
		cmds := docCommands(t, path)
		total += len(cmds)
		for _, c := range cmds {
			if err := checkDocCommand(c); err != nil {
				t.Errorf("%s: nerflow %s: %v", c.where, strings.Join(c.args, " "), err)
			}
		}
	}
	if total < 50 {
		t.Errorf("found %d documented command lines; the extraction is broken", total)
	}
	t.Logf("%d documented command lines checked", total)
}

// The checker itself: it catches what it is there for.
func TestDocCommandChecker(t *testing.T) {
	for _, c := range []struct {
		line   string
		inline bool
		bad    bool
	}{
		{line: "nerflow status RUN --watch"},
		{line: "nerflow status RUN --watch 5s"},
		{line: "nerflow status RUN --wacth", bad: true},
		{line: "nerflow statsu RUN", bad: true},
		{line: "nerflow models lst", bad: true},
		{line: "nerflow models list; nerflow models show x@1"},
		{line: "nerflow runs --limit", bad: true},
		{line: "nerflow runs --limit", inline: true, bad: false},
		{line: "nerflow runs --limt", inline: true, bad: true},
		{line: "nerflow cancel", bad: true},
		{line: "nerflow train ... --layers 2"},
		{line: `NERFLOW_REDIS_ADDR=r:6379 bin/nerflow worker --queues gpu,cpu --device cuda:0 2>&1 | tee log # note`},
		{line: `nerflow worker --queues cpu > log; nerflow retry RUN --bogus`, bad: true},
	} {
		var errs []error
		for _, words := range shellCommands(c.line) {
			if args, ok := nerflowArgs(words); ok {
				if err := checkDocCommand(docCommand{where: "x", args: args, inline: c.inline}); err != nil {
					errs = append(errs, err)
				}
			}
		}
		if got := len(errs) > 0; got != c.bad {
			t.Errorf("%q (inline %v): errors %v, want some: %v", c.line, c.inline, errs, c.bad)
		}
	}
}
