// Package history records what concurrent clients did to a ticketd cluster:
// one Op per client call, with its invocation and completion times on one
// monotonic client-side clock, its inputs, and its outcome (OK, Fail or
// Unknown). It is the input of package check, in the shape Jepsen and
// porcupine use: a call interval per operation, and an outcome that says
// whether the call certainly took effect, certainly did not, or may have.
//
// # Usage
//
//  1. Create one Recorder per run with NewRecorder; every client goroutine
//     shares it (it is safe for concurrent use).
//  2. Before sending a request, call Recorder.Invoke with the Op's inputs;
//     it stamps Call.
//  3. When the call returns, fill the outputs and Outcome and pass the Op to
//     Recorder.Complete; it stamps Return. Classify errors with Classify: a
//     timeout, a connection error, or any error that does not prove the
//     request was refused before it was proposed is Unknown, never Fail.
//  4. After the run, History returns every Op sorted by Call; Write and Read
//     store a history as JSON lines (one Op per line) so a failing run can be
//     checked again offline.
//
// Example:
//
//	rec := history.NewRecorder()
//	op := rec.Invoke(history.Op{Client: 3, Kind: history.Acquire, Key: "k1", Owner: "w3-1", LeaseMS: 2000})
//	res, err := client.Acquire(ctx, req)
//	if err == nil {
//		op.Outcome, op.Token = history.OK, res.Msg.Token
//	} else {
//		op.Outcome, op.Code = history.Classify(history.Acquire, err)
//	}
//	rec.Complete(op)
package history
