package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"connectrpc.com/connect"
)

// Output formats of -o (--output, TICKETD_OUTPUT).
const (
	// outText is for people; it may change between versions.
	outText = "text"
	// outJSON is the API's own JSON (protojson: the .proto's lowerCamelCase
	// field names, 64-bit integers as strings), one object per line, so
	// that ticketctl's JSON and curl's against the API are one dialect.
	outJSON = "json"
	// outValue is the bare value a script captures with $(...): the token
	// for "lock acquire" (valuer).
	outValue = "value"
)

// valuer is a result that has the one value "-o value" prints; an empty
// value prints nothing, several values print one per line.
type valuer interface {
	value() string
}

// print writes v in the -o format: compact JSON on one line, its value, or
// with text.
func (g *globals) print(v any, text func(w io.Writer, v any)) error {
	switch g.output {
	case outJSON:
		return json.NewEncoder(g.stdout).Encode(v)
	case outValue:
		vv, ok := v.(valuer)
		if !ok {
			return usagef("-o value is not supported here; use -o json")
		}
		if s := vv.value(); s != "" {
			_, err := fmt.Fprintln(g.stdout, s)
			return err
		}
		return nil
	}
	text(g.stdout, v)
	return nil
}

// errorJSON is how an error is printed under -o json, on stderr: the shape
// of a Connect error body ({"code", "message"}) plus the exit code.
type errorJSON struct {
	// Code is the server's code ("already_exists") when a server answered,
	// else ticketctl's own: "usage", "still_held", "not_current" or
	// "unknown".
	Code     string `json:"code"`
	Message  string `json:"message"`
	ExitCode int    `json:"exitCode"`
}

// errorOf describes err for -o json; code is its exit code.
func errorOf(err error, code int) errorJSON {
	e := errorJSON{Code: "unknown", Message: err.Error(), ExitCode: code}
	var ce *connect.Error
	switch {
	case code == exitUsage:
		e.Code = "usage"
	case code == exitStillHeld:
		e.Code = "still_held"
	case errors.Is(err, errInvalidToken):
		e.Code = "not_current"
	case errors.As(err, &ce):
		e.Code = ce.Code().String()
	}
	return e
}
