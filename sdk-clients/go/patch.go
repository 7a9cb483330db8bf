package waymark

// Changing workflow code while workflows begun under the old code are still running: a replay
// of one of them under the new code would call other steps than its history records, and fail
// with ErrNonDeterminism. Patched lets the new code branch on the change instead, by a marker
// the new branch records (waymark.patch).

// Patched is whether this run takes the branch of the code change patchID:
//
//	ok, err := waymark.Patched(ctx, "charge-in-cents")
//	if err != nil {
//		return nil, err
//	}
//	if ok {
//		… the new code …
//	} else {
//		… the old code …
//	}
//
// True for a run that gets here under this code — it records a marker (waymark.patch
// {"patch_id": patchID}), one step position, held back and sent with the workflow's next
// step, request or completion as Now's record is — and for every replay of such a run. False
// for a run whose history was made here by code without the change (another step is recorded
// at this position, or another patch's marker): it replays the old branch, and the position
// is left to the old branch's next call, so its steps line up with their records. Once no
// workflow begun before the change is left, the old branch can go; the call must stay while
// histories with the marker may still be replayed.
//
// A marker recorded here without its patch_id is an error, as a built-in step's record of
// another shape is. A workflow cancelled, parked or taken over gets the cause from a live call
// (one that would record the marker), as from Step; offline (a Replayer) a live call is the
// end of the history.
func Patched(ctx Context, patchID string) (bool, error) {
	r := ctx.run()
	// A dropped run takes no position (see run.take).
	if err := r.droppedErr(); err != nil {
		return false, err
	}
	answer, step, err := r.hist.patched(patchID)
	if err != nil || answer != patchLive {
		return answer == patchReplayed, err
	}
	// Offline, nothing is recorded: the history ends here.
	if err := r.live(step); err != nil {
		return false, err
	}
	if err := r.stopped(); err != nil {
		return false, err
	}
	r.hold(r.stepRecord(step, patchStep, mustPayload(map[string]any{"patch_id": patchID}), nil, 1))
	return true, nil
}
