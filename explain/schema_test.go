package explain

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Every corpus report validates against the documented JSON Schema.
func TestJSONMatchesSchema(t *testing.T) {
	c := jsonschema.NewCompiler()
	sch, err := c.Compile("report.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	e := testExplainer(t)
	for name := range allCorpusCases() {
		r := analyzeCorpus(t, e, filepath.Join("testdata", "corpus", name))
		var buf bytes.Buffer
		if err := WriteJSON(&buf, r); err != nil {
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
