package distant

import (
	"bytes"
	"fmt"
	"io"
	"slices"

	"github.com/nerflow/nerflow/dataset"
	"github.com/nerflow/nerflow/stages"
)

// StageNames is the stage that finds person names in a corpus (MineNames).
const StageNames = "distant.names"

func init() {
	stages.Register(stages.Stage{
		Name:    StageNames,
		Version: 3, // 2: surnames of the names found (MinedNames.Surnames), 3: head words end names
		Doc: "Finds person names in a corpus from lists of first names and titles (a known first name, or a title, " +
			"followed by capitalized words and initials), with the surnames of those of two words or more (Barnett of " +
			"Ross Barnett, found alone elsewhere), and writes them as a PER gazetteer for " + StageName + ".",
		Params: append([]stages.Param{
			stages.IntParam("min_common", 2, "a first name whose lower-case form occurs this often in the corpus is a common word there (Will, May, Mark) and starts no name", stages.AtLeast(1)),
			stages.IntParam("top", 20, "most frequent names listed in the report", stages.Range(0, 10000)),
		}, dataset.SourceParams("corpus", "sentences to search")...),
		Inputs: []stages.Port{
			{Name: "corpus", Kind: "corpus", Doc: "sentences to search"},
			{Name: "names", Kind: "names", Many: true, Doc: "name lists: KIND<TAB>WORD lines, KIND first, title or common; every file of every artifact"},
			{Name: "gazetteers", Kind: "gazetteer", Many: true, Optional: true, Doc: "typed gazetteers: a first name they list as one word of another type (Georgia as LOC) starts no name"},
		},
		Outputs: []stages.Port{
			{Name: "gazetteer", Kind: "gazetteer", Doc: "names.tsv: PER<TAB>phrase per name found"},
			{Name: "report", Kind: "report", Doc: "report.json and report.txt: names found, most frequent, first names left out as common words"},
		},
		Run: runNamesStage,
	})
}

// namesReport is the stage's report.
type namesReport struct {
	Sentences int      `json:"sentences"`
	Names     int      `json:"names"`    // distinct phrases
	Surnames  int      `json:"surnames"` // last words of those names, found alone too
	Mentions  int      `json:"mentions"` // occurrences
	Top       []string `json:"top"`
	Common    []string `json:"common_first_names"`   // left out
	Excluded  []string `json:"excluded_first_names"` // typed otherwise by a gazetteer
}

func runNamesStage(c *stages.Context) error {
	lists, err := readNameListInputs(c)
	if err != nil {
		return err
	}
	gazetteers, err := readGazetteers(c.Inputs("gazetteers"), nil, nil)
	if err != nil {
		return err
	}
	excluded := lists.DropTypedOtherwise(gazetteers)
	text, err := dataset.ReadInput(c.Input("corpus"), c.Params, "corpus")
	if err != nil {
		return err
	}
	mined := MineNames(text, lists, c.Params.Int("min_common"))
	rep := namesReport{Sentences: len(text.Sentences), Names: len(mined.Phrases), Surnames: len(mined.Surnames), Common: mined.Ambiguous, Excluded: excluded}
	for _, p := range mined.Phrases {
		rep.Mentions += mined.Counts[p]
	}
	rep.Top = topPhrases(mined, c.Params.Int("top"))
	c.Log.Info("person names found", "names", rep.Names, "surnames", rep.Surnames, "mentions", rep.Mentions, "common_first_names", len(rep.Common))

	var gaz bytes.Buffer
	if err := mined.WriteGazetteer(&gaz); err != nil {
		return err
	}
	if err := c.Output("gazetteer").WriteFile("names.tsv", gaz.Bytes()); err != nil {
		return err
	}
	var txt bytes.Buffer
	fmt.Fprintf(&txt, "%d person names (%d mentions) in %d sentences, and %d surnames of them\nmost frequent: %v\nfirst names left out as common words here: %v\nfirst names a gazetteer types otherwise: %v\n",
		rep.Names, rep.Mentions, rep.Sentences, rep.Surnames, rep.Top, rep.Common, rep.Excluded)
	if err := c.Output("report").WriteJSON("report.json", rep); err != nil {
		return err
	}
	return c.Output("report").WriteFile("report.txt", txt.Bytes())
}

// readNameListInputs reads every file of input names as name lists.
func readNameListInputs(c *stages.Context) (NameLists, error) {
	var lists NameLists
	for _, in := range c.Inputs("names") {
		for _, f := range in.Files {
			err := readInput(in, f.Name, func(r io.Reader) error {
				if err := ReadNameLists(r, f.Name, &lists); err != nil {
					return stages.Permanent(err)
				}
				return nil
			})
			if err != nil {
				return NameLists{}, err
			}
		}
	}
	return lists, nil
}

// topPhrases lists the n most frequent phrases, "phrase (count)", ties in
// order of first appearance.
func topPhrases(m MinedNames, n int) []string {
	order := slices.Clone(m.Phrases)
	slices.SortStableFunc(order, func(a, b string) int { return m.Counts[b] - m.Counts[a] })
	var out []string
	for _, p := range order[:min(n, len(order))] {
		out = append(out, fmt.Sprintf("%s (%d)", p, m.Counts[p]))
	}
	return out
}
