package explain

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Every report of the whole corpus validates against the documented JSON
// Schema and survives a round trip.
func TestJSONMatchesSchema(t *testing.T) {
	c := jsonschema.NewCompiler()
	sch, err := c.Compile("report.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	e := testExplainer(t)
	ents, err := os.ReadDir(filepath.Join("testdata", "corpus"))
	if err != nil {
		t.Fatal(err)
	}
	for _, ent := range ents {
		name := ent.Name()
		r := analyzeCorpus(t, e, filepath.Join("testdata", "corpus", name))
		var buf bytes.Buffer
		if err := writeJSON(&buf, r); err != nil {
			t.Fatal(err)
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(buf.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		if err := sch.Validate(doc); err != nil {
			t.Errorf("%s: %v\n%s", name, err, buf.String())
		}
		var back Report
		if err := json.Unmarshal(buf.Bytes(), &back); err != nil || len(back.Diagnoses) != len(r.Diagnoses) {
			t.Errorf("%s: round trip: %v", name, err)
		}
	}
}
