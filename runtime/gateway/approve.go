package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/mcpledger/mcpledger/runtime"
	"github.com/mcpledger/mcpledger/runtime/guard"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// approvalSchema is the form a client's user fills to approve a call.
var approvalSchema = json.RawMessage(`{"type":"object","properties":{"approve":{"type":"boolean","title":"Allow this call",` +
	`"description":"Allow the tool call described above to run once"}},"required":["approve"]}`)

// maxApprovalArgs bounds how much of a call's arguments the approval
// message shows.
const maxApprovalArgs = 2000

// approve is the runtime.Approver Bind installs: it asks the user of the client
// that made the call, by elicitation, whether the call may run: a
// server-to-client elicitation/create, or for a client of 2026-07-28 an
// input_required result whose retry carries the answer (the first round
// is then journaled as denied, saying the user was asked). A call
// that did not come through the gateway, or whose client did not declare
// the elicitation capability, is denied with a reason saying so. The
// answer (or its absence) is journaled by the Manager as call.decided, by
// "approver:elicitation:CLIENT/VERSION" (or "approver:gateway" when nobody
// could be asked).
func (g *Gateway) approve(ctx context.Context, req runtime.ApprovalRequest) (runtime.Approval, error) {
	gc := callOf(ctx)
	if gc == nil {
		return runtime.Approval{By: "gateway", Reason: "the call policy is ask and the call did not come through a gateway client that could be asked"}, nil
	}
	who := g.caller(gc.peer)
	if c := capsOf(gc.peer); c.Elicitation == nil {
		return runtime.Approval{By: "gateway", Reason: fmt.Sprintf("the call policy is ask: the call needs its user's approval, and the client (%s) did not declare the elicitation capability to ask for it; approve it with `mcpledger call`, or set the tool's policy to always", who)}, nil
	}
	by := "elicitation:" + strings.SplitN(who, " ", 2)[0]
	if gc.approvedBy != "" {
		// Approved in an earlier round of this call (the server then asked
		// for input, and the call is made again with the answers).
		return runtime.Approval{Allow: true, By: gc.approvedBy}, nil
	}
	args := string(req.Args)
	if len(args) > maxApprovalArgs {
		args = args[:maxApprovalArgs] + fmt.Sprintf("… (%d bytes in all)", len(req.Args))
	}
	msg := fmt.Sprintf("mcpledger: allow the tool %q of server %q to run?\nArguments: %s", req.Tool, req.Server, args)
	if a := req.Annotations; a.Destructive != nil && *a.Destructive {
		msg += "\nThe server marks this tool as destructive."
	}
	var res *mcp.ElicitResult
	if inputRequired(gc.peer) {
		// A 2026-07-28 client is asked by an input_required result; its
		// retry carries the answer (inputrequired.go).
		if res = gc.answer; res == nil {
			gc.ask = &mcp.ElicitParams{Mode: "form", Message: msg, RequestedSchema: approvalSchema}
			return runtime.Approval{By: "gateway", Reason: "the call policy is ask: the client's user was asked for approval (input_required); the call runs when the client retries with the answer"}, nil
		}
	} else {
		ectx, cancel := g.forwardContext(ctx, gc, g.opts.ApprovalTimeout)
		defer cancel()
		var err error
		res, err = gc.ss.Elicit(ectx, &mcp.ElicitParams{Message: msg, RequestedSchema: approvalSchema})
		switch {
		case err != nil && ctx.Err() == nil && ectx.Err() != nil:
			return runtime.Approval{By: by, Reason: fmt.Sprintf("no answer within %s", g.opts.ApprovalTimeout)}, nil
		case err != nil:
			return runtime.Approval{By: by}, fmt.Errorf("asking %s: %w", who, err)
		}
	}
	switch {
	case res.Action == "accept":
		if ok, _ := res.Content["approve"].(bool); ok {
			gc.approvedBy = by
			return runtime.Approval{Allow: true, By: by}, nil
		}
		return runtime.Approval{By: by, Reason: "the user did not approve the call"}, nil
	case res.Action == "decline":
		return runtime.Approval{By: by, Reason: "the user declined the call"}, nil
	}
	return runtime.Approval{By: by, Reason: "the user dismissed the approval request (" + guard.OneLine(res.Action) + ")"}, nil
}
