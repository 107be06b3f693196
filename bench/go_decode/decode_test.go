// What kube-scheduler 1.20 pays to read an extender's replies: its HTTPExtender.send decodes
// them with encoding/json into the extender/v1 types (mirrored here: same field names, no tags,
// so the same case-insensitive matching), and prioritizeNodes then sums the scores per host.
// Run: cd bench/go_decode && go test -bench . -benchtime 3s   (bench/RESULTS.md, issue #13)
package godecode

import (
	"encoding/json"
	"fmt"
	"testing"
)

type HostPriority struct {
	Host  string
	Score int64
}

type HostPriorityList []HostPriority

type ExtenderFilterResult struct {
	Nodes       *struct{ Items []json.RawMessage }
	NodeNames   *[]string
	FailedNodes map[string]string
	Error       string
}

func names(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("node-%05d", i)
	}
	return out
}

func uniform(n int) []byte {
	list := HostPriorityList{}
	for _, h := range names(n) {
		list = append(list, HostPriority{Host: h, Score: 10})
	}
	b, _ := json.Marshal(list)
	return b
}

// prioritize reads the reply and adds it up as 1.20's prioritizeNodes does.
func prioritize(b *testing.B, body []byte, nodes int) {
	for i := 0; i < b.N; i++ {
		var list HostPriorityList
		if err := json.Unmarshal(body, &list); err != nil {
			b.Fatal(err)
		}
		combined := make(map[string]int64, nodes)
		for _, h := range list {
			combined[h.Host] += h.Score
		}
	}
}

func BenchmarkPrioritizeUniform200(b *testing.B) { prioritize(b, uniform(200), 200) }

func BenchmarkPrioritizeEmpty(b *testing.B) { prioritize(b, []byte("[]"), 200) }

func BenchmarkFilterAllPass200(b *testing.B) {
	body, _ := json.Marshal(map[string]interface{}{
		"Nodes": nil, "NodeNames": names(200), "FailedNodes": map[string]string{},
		"FailedAndUnresolvableNodes": map[string]string{}, "Error": "",
	})
	for i := 0; i < b.N; i++ {
		var r ExtenderFilterResult
		if err := json.Unmarshal(body, &r); err != nil {
			b.Fatal(err)
		}
	}
}
