// The floor under runway's gate webhook (bench/gates.py): the same answer — allowed, with the
// JSONPatch that appends the scheduling gate runway.dev/admission — from a Go HTTPS server that
// decides nothing. kube-apiserver's own histogram of its calls to this server, in the same
// burst on the same machine, is what any webhook costs there; runway's is read against it.
// Run by bench.gates: go run . -cert tls.crt -key tls.key -addr 127.0.0.1:PORT
package main

import (
	"encoding/base64"
	"encoding/json"
	"flag"
	"io"
	"log"
	"net/http"
)

type review struct {
	Request struct {
		UID    string `json:"uid"`
		Object struct {
			Spec struct {
				SchedulingGates []json.RawMessage `json:"schedulingGates"`
			} `json:"spec"`
		} `json:"object"`
	} `json:"request"`
}

func main() {
	cert := flag.String("cert", "", "PEM certificate")
	key := flag.String("key", "", "PEM key")
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	flag.Parse()
	http.HandleFunc("/webhooks/gate", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var in review
		if err := json.Unmarshal(body, &in); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		patch := `[{"op":"add","path":"/spec/schedulingGates","value":[{"name":"runway.dev/admission"}]}]`
		if len(in.Request.Object.Spec.SchedulingGates) > 0 {
			patch = `[{"op":"add","path":"/spec/schedulingGates/-","value":{"name":"runway.dev/admission"}}]`
		}
		out := map[string]any{
			"apiVersion": "admission.k8s.io/v1",
			"kind":       "AdmissionReview",
			"response": map[string]any{
				"uid":       in.Request.UID,
				"allowed":   true,
				"patchType": "JSONPatch",
				"patch":     base64.StdEncoding.EncodeToString([]byte(patch)),
			},
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	})
	log.Fatal(http.ListenAndServeTLS(*addr, *cert, *key, nil))
}
