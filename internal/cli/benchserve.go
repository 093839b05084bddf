package cli

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/nerflow/nerflow/internal/servebench"
)

func init() {
	register(func(a *app) *cobra.Command {
		var (
			c        servebench.Config
			textFile string
			asJSON   bool
		)
		cmd := &cobra.Command{
			Use:   "bench-serve",
			Short: "Put a running nerflow serve under load and check its answers",
			Long: `Bench-serve sends POST /v1/predict from --clients clients at once, each its
next request as soon as it has its answer, for --duration, and reports the
answers per status, their latency (p50, p90, p99), and which model version
answered when. With --promote NAME@N it moves the --tag of the served model
to that version midway (--promote-after), through the server's API.

It checks every answer: no 5xx but a 503 that says when to come back
(Retry-After, as a 429 must too), every answer names the version that
tagged it (the body's model.version and the Nerflow-Model-Version header
agree), and a version answers a text the same way every time. A refused
client waits its Retry-After. The command fails if any check did.

The token is serve.token (NERFLOW_SERVE_TOKEN), as for nerflow serve.`,
			Example: `  nerflow bench-serve --url http://127.0.0.1:8080 --clients 32 --duration 30s --promote tiny@2
  nerflow bench-serve --text-file texts.txt --json`,
			Args: cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				c.Token = a.cfg.Serve.Token
				if c.URL == "" {
					c.URL = "http://" + a.cfg.Serve.Addr
				}
				if textFile != "" {
					texts, err := readTexts(textFile)
					if err != nil {
						return err
					}
					c.Texts = texts
				}
				r, err := servebench.Run(cmd.Context(), c)
				if err != nil {
					return err
				}
				if asJSON {
					if err := writeJSON(cmd.OutOrStdout(), r); err != nil {
						return err
					}
				} else {
					r.Print(cmd.OutOrStdout())
				}
				if len(r.Problems) > 0 {
					return fmt.Errorf("%d kinds of wrong answers: %s", len(r.Problems), strings.Join(r.Problems, "; "))
				}
				return nil
			},
		}
		f := cmd.Flags()
		f.StringVar(&c.URL, "url", "", "the server's base URL (default http:// and serve.addr)")
		f.IntVar(&c.Clients, "clients", 32, "clients sending requests at once")
		f.DurationVar(&c.Duration, "duration", 30*time.Second, "how long to send requests")
		f.StringVar(&textFile, "text-file", "", "texts to send, one per line (default: a few news sentences)")
		f.StringVar(&c.Promote, "promote", "", "promote this model version (NAME@N) midway")
		f.StringVar(&c.PromoteTag, "tag", "production", "the tag --promote moves")
		f.DurationVar(&c.PromoteAfter, "promote-after", 0, "when to promote, from the start (default half of --duration)")
		f.BoolVar(&asJSON, "json", false, "print the report as JSON")
		return cmd
	})
}

// readTexts reads the non-blank lines of a file.
func readTexts(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var texts []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" {
			texts = append(texts, line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if len(texts) == 0 {
		return nil, fmt.Errorf("%s has no text", path)
	}
	return texts, nil
}
