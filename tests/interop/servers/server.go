// The scripted completion (see script.py for what and when) served by Go's net/http.
//
// net/http frames the answer itself: a streamed answer is chunked (the handler flushes each
// write), a whole one carries the Content-Length the handler sets. The idle timeout is
// http.Server.IdleTimeout. net/http has no per-connection request limit, writes every status
// line in the request's own version and compresses nothing, so --max-requests is refused.
//
//	go build -o interop-go server.go && ./interop-go --port 8000 [--idle-timeout 0.3]
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

type script struct {
	ttft, itl time.Duration
	tokens    int
}

func (s script) due(arrived time.Time, k int) time.Time {
	return arrived.Add(s.ttft + time.Duration(k)*s.itl)
}

func (s script) usage() map[string]int {
	return map[string]int{"prompt_tokens": 0, "completion_tokens": s.tokens, "total_tokens": s.tokens}
}

func event(fields map[string]any) []byte {
	body := map[string]any{"id": "interop", "object": "chat.completion.chunk", "created": 0, "model": "interop"}
	for k, v := range fields {
		body[k] = v
	}
	data, _ := json.Marshal(body)
	return []byte("data: " + string(data) + "\n\n")
}

func (s script) chunk(k int) []byte {
	var finish any
	if k == s.tokens-1 {
		finish = "length"
	}
	choice := map[string]any{"index": 0, "delta": map[string]string{"content": fmt.Sprintf(" t%d", k)}, "finish_reason": finish}
	return event(map[string]any{"choices": []any{choice}})
}

// named is token k in the named events of the Responses (/v1/responses) or Messages (/v1/messages) API,
// the opening event before the first; namedTail the closing events with the usage.
func named(name string, fields string) []byte {
	return []byte("event: " + name + "\ndata: {\"type\":\"" + name + "\"" + fields + "}\n\n")
}

func (s script) named(path string, k int) []byte {
	var out []byte
	if path == "/v1/responses" {
		if k == 0 {
			out = named("response.created", `,"response":{"id":"interop","status":"in_progress"}`)
		}
		return append(out, named("response.output_text.delta", fmt.Sprintf(`,"delta":" t%d"`, k))...)
	}
	if k == 0 {
		out = named("message_start", `,"message":{"id":"interop","usage":{"input_tokens":0,"output_tokens":1}}`)
	}
	return append(out, named("content_block_delta", fmt.Sprintf(`,"index":0,"delta":{"type":"text_delta","text":" t%d"}`, k))...)
}

func (s script) namedTail(path string) []byte {
	if path == "/v1/responses" {
		return named("response.completed", fmt.Sprintf(
			`,"response":{"id":"interop","status":"completed","usage":{"input_tokens":0,"output_tokens":%d}}`, s.tokens))
	}
	delta := named("message_delta", fmt.Sprintf(`,"delta":{"stop_reason":"max_tokens"},"usage":{"output_tokens":%d}`, s.tokens))
	return append(delta, named("message_stop", "")...)
}

func (s script) whole() []byte {
	var text strings.Builder
	for k := 0; k < s.tokens; k++ {
		fmt.Fprintf(&text, " t%d", k)
	}
	choice := map[string]any{"index": 0, "message": map[string]string{"role": "assistant", "content": text.String()}, "finish_reason": "length"}
	data, _ := json.Marshal(map[string]any{"id": "interop", "object": "chat.completion", "created": 0, "model": "interop",
		"choices": []any{choice}, "usage": s.usage()})
	return data
}

// connections counts completion requests per client address (one TCP connection each).
type connections struct {
	mu  sync.Mutex
	per map[string]int
}

func (c *connections) seen(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.per[key]++
}

func (c *connections) report() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	requests, most := 0, 0
	for _, n := range c.per {
		requests += n
		if n > most {
			most = n
		}
	}
	data, _ := json.Marshal(map[string]int{"requests": requests, "connections": len(c.per), "most": most})
	return data
}

type request struct {
	Stream        bool `json:"stream"`
	StreamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

func main() {
	port := flag.Int("port", 0, "port on 127.0.0.1")
	ttft := flag.Float64("ttft", 0.05, "seconds to the first token")
	itl := flag.Float64("itl", 0.01, "seconds between tokens")
	tokens := flag.Int("tokens", 8, "tokens per answer")
	idle := flag.Float64("idle-timeout", 0, "http.Server.IdleTimeout in seconds (0: the default)")
	maxRequests := flag.Int("max-requests", 0, "not supported by net/http")
	flag.Parse()
	if *maxRequests != 0 {
		log.Fatal("net/http has no per-connection request limit")
	}
	s := script{time.Duration(*ttft * float64(time.Second)), time.Duration(*itl * float64(time.Second)), *tokens}
	conns := &connections{per: map[string]int{}}

	mux := http.NewServeMux()
	mux.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })
	mux.HandleFunc("/stats", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(conns.report())
	})
	complete := func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		arrived := time.Now()
		conns.seen(r.RemoteAddr)
		var req request
		json.Unmarshal(body, &req)
		if !req.Stream {
			time.Sleep(time.Until(s.due(arrived, s.tokens-1)))
			data := s.whole()
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", fmt.Sprint(len(data)))
			w.Write(data)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		flusher := w.(http.Flusher)
		chat := r.URL.Path == "/v1/chat/completions"
		for k := 0; k < s.tokens; k++ {
			time.Sleep(time.Until(s.due(arrived, k)))
			if chat {
				w.Write(s.chunk(k))
			} else {
				w.Write(s.named(r.URL.Path, k))
			}
			flusher.Flush()
		}
		if !chat {
			w.Write(s.namedTail(r.URL.Path))
			return
		}
		if req.StreamOptions.IncludeUsage {
			w.Write(event(map[string]any{"choices": []any{}, "usage": s.usage()}))
		}
		w.Write([]byte("data: [DONE]\n\n"))
	}
	for _, path := range []string{"/v1/chat/completions", "/v1/responses", "/v1/messages"} {
		mux.HandleFunc(path, complete)
	}

	server := &http.Server{Addr: fmt.Sprintf("127.0.0.1:%d", *port), Handler: mux}
	if *idle > 0 {
		server.IdleTimeout = time.Duration(*idle * float64(time.Second))
	}
	fmt.Fprintf(os.Stderr, "go %s listening on http://%s\n", "net/http", server.Addr)
	log.Fatal(server.ListenAndServe())
}
