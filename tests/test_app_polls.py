"""A view's poll sends only what changed (app.context.changed_only) and slows down when nothing it shows is
live (LabContext.poll_pace): each tick costs the browser a pass over the whole page."""
import gradio as gr
import plotly.graph_objects as go

from app.context import IDLE_POLL_S, LabContext, changed_only


def figure(ys: list[float]) -> go.Figure:
    return go.Figure(go.Scatter(x=list(range(len(ys))), y=ys))


def test_first_poll_sends_everything_and_the_next_only_what_changed():
    rows, fig = [[1, "running", "step 2/5"]], figure([0.1, 0.2])
    updates, sent = changed_only([rows, fig, "**Now:** step 2"], None)
    assert updates[0] == rows and updates[1] is fig and updates[2] == "**Now:** step 2"
    assert len(sent) == 3 and all(isinstance(d, str) for d in sent)

    # the same values, built anew (a new list, a new figure of the same data): nothing is sent
    again, same = changed_only([[[1, "running", "step 2/5"]], figure([0.1, 0.2]), "**Now:** step 2"], sent)
    assert again == [gr.skip()] * 3 and same == sent

    # only the progress line moved: the table and the plot are not redrawn
    moved, after = changed_only([[[1, "running", "step 2/5"]], figure([0.1, 0.2]), "**Now:** step 3"], sent)
    assert moved[:2] == [gr.skip(), gr.skip()] and moved[2] == "**Now:** step 3"
    assert after[:2] == sent[:2] and after[2] != sent[2]

    # a new point on the curve is sent
    grown, _ = changed_only([rows, figure([0.1, 0.2, 0.3]), "**Now:** step 3"], after)
    assert isinstance(grown[1], go.Figure) and grown[0] == gr.skip()


def test_a_reset_state_or_a_skipped_value_keeps_the_page_right():
    rows = [[1, "succeeded"]]
    _, sent = changed_only([rows, "done"], None)
    # another handler wrote the same outputs and reset the State: the next poll sends everything again
    assert changed_only([rows, "done"], None)[0] == [rows, "done"]
    # a handler's own gr.skip() keeps the digest of what the page still shows
    updates, kept = changed_only([gr.skip(), "done"], sent)
    assert updates == [gr.skip(), gr.skip()] and kept == sent
    # a State from a poll with other outputs (the view changed) is not trusted
    assert changed_only([rows, "done", "more"], sent)[0] == [rows, "done", "more"]


def test_the_pace_is_the_views_period_while_live_and_idle_otherwise():
    live, idle = LabContext.poll_pace(True, 2.0), LabContext.poll_pace(False, 2.0)
    assert live["value"] == 2.0 and idle["value"] == IDLE_POLL_S > 2.0
    _, sent = changed_only([idle], None)
    assert changed_only([LabContext.poll_pace(False, 2.0)], sent)[0] == [gr.skip()]  # sent once per change
    assert changed_only([live], sent)[0] == [live]
