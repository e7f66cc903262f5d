package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
)

// store is the toy storage server: one counter, guarded by fencing tokens.
// Every read and write carries the token of the lock its client holds; the
// store remembers the highest token it has seen and refuses any request
// with a lower one. Reads count as "seen": once a newer holder has read the
// counter, an older holder can no longer write a value it computed before.
type store struct {
	mu       sync.Mutex
	value    int64
	highest  uint64
	accepted []write // in order
	rejected []write
	// onStall, if set, is called by /stall and returns when the stall is
	// over (the parent stops the worker's process meanwhile).
	onStall func(worker int, token uint64)
}

// write is one write request as the store saw it.
type write struct {
	Worker int    `json:"worker"`
	Token  uint64 `json:"token"`
	Value  int64  `json:"value"`
	// Highest is the highest token the store had seen when it refused the
	// write (rejected writes only).
	Highest uint64 `json:"highest,omitempty"`
}

type storeRequest struct {
	Worker int    `json:"worker"`
	Token  uint64 `json:"token"`
	Value  int64  `json:"value"`
}

type storeReply struct {
	Value int64  `json:"value"`
	Error string `json:"error,omitempty"`
}

func (s *store) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /read", func(w http.ResponseWriter, r *http.Request) {
		req, ok := decode(w, r)
		if !ok {
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if err := s.fence(req.Token); err != nil {
			reply(w, http.StatusConflict, storeReply{Error: err.Error()})
			return
		}
		reply(w, http.StatusOK, storeReply{Value: s.value})
	})
	mux.HandleFunc("POST /write", func(w http.ResponseWriter, r *http.Request) {
		req, ok := decode(w, r)
		if !ok {
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		wr := write{Worker: req.Worker, Token: req.Token, Value: req.Value}
		if err := s.fence(req.Token); err != nil {
			wr.Highest = s.highest
			s.rejected = append(s.rejected, wr)
			reply(w, http.StatusConflict, storeReply{Error: err.Error()})
			return
		}
		s.value = req.Value
		s.accepted = append(s.accepted, wr)
		reply(w, http.StatusOK, storeReply{Value: s.value})
	})
	mux.HandleFunc("POST /stall", func(w http.ResponseWriter, r *http.Request) {
		req, ok := decode(w, r)
		if !ok {
			return
		}
		if s.onStall != nil {
			s.onStall(req.Worker, req.Token)
		}
		reply(w, http.StatusOK, storeReply{})
	})
	return mux
}

// fence is the fencing rule (Kleppmann's fencing tokens, Chubby's
// sequencers), applied with s.mu held to every read and write: a token lower
// than the highest seen is refused; any other becomes the highest.
func (s *store) fence(token uint64) error {
	if token < s.highest {
		return fmt.Errorf("stale token %d < %d", token, s.highest)
	}
	s.highest = token
	return nil
}

// highestToken returns the highest token seen so far.
func (s *store) highestToken() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.highest
}

func decode(w http.ResponseWriter, r *http.Request) (storeRequest, bool) {
	var req storeRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Token == 0 {
		reply(w, http.StatusBadRequest, storeReply{Error: "want {worker, token > 0, value}"})
		return req, false
	}
	return req, true
}

func reply(w http.ResponseWriter, code int, v storeReply) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
