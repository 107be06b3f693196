// The floor under any kube-scheduler extender (bench/throughput.py, kind go-floor): filter
// answers every node it was given, prioritize answers no scores, and nothing is decided. What
// kube-scheduler's cycle pays for calling this server — Go to HTTP over loopback and back,
// synchronous in the cycle, on the same cores — is what any extender costs on the machine;
// runway's filter-only rate is read against it.
//
// The wire keys are the Go field names of k8s.io/kube-scheduler's extender/v1 types, which
// carry no json tags: ExtenderArgs {Pod, Nodes, NodeNames}, ExtenderFilterResult {Nodes,
// NodeNames, FailedNodes, FailedAndUnresolvableNodes, Error} (kube-scheduler's encoding/json
// also matches them case-insensitively). Only the node fields are decoded: NodeNames
// (nodeCacheCapable true) into strings, Nodes (false: a whole NodeList) kept raw and sent back
// as it came.
//
// Run by bench.throughput: go build -o go-extender . && ./go-extender -addr 127.0.0.1:PORT
package main

import (
	"encoding/json"
	"flag"
	"io"
	"log"
	"net/http"
)

// filterArgs is the part of ExtenderArgs the floor reads.
type filterArgs struct {
	Nodes     json.RawMessage
	NodeNames *[]string
}

// filterResult is ExtenderFilterResult: every node passes.
type filterResult struct {
	Nodes                      json.RawMessage
	NodeNames                  *[]string
	FailedNodes                map[string]string
	FailedAndUnresolvableNodes map[string]string
	Error                      string
}

func filter(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var in filterArgs
	if err := json.Unmarshal(body, &in); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	out := filterResult{
		Nodes:                      in.Nodes,
		NodeNames:                  in.NodeNames,
		FailedNodes:                map[string]string{},
		FailedAndUnresolvableNodes: map[string]string{},
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

func prioritize(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body) // read, so that the connection is kept alive
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte("[]\n"))
}

func ok(w http.ResponseWriter, _ *http.Request) {
	_, _ = w.Write([]byte("ok"))
}

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	flag.Parse()
	http.HandleFunc("/scheduler/filter", filter)
	http.HandleFunc("/scheduler/prioritize", prioritize)
	http.HandleFunc("/healthz", ok)
	http.HandleFunc("/readyz", ok)
	log.Fatal(http.ListenAndServe(*addr, nil))
}
