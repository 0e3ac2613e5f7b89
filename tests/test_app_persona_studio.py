"""The persona studio end to end, in a real browser against the lab on a real SQLite file: generate 24
personas for a spec against a local OpenAI-compatible server (the scripted one), review and accept them,
save them as a set, lint them in the list and the editor, preview one, split the set 80/20 in the Sets
panel and launch training on the train part from the Training view. Each step's finer cases have their
own tests (test_app_persona_generation, _lint, _sets); this one checks that the steps join up."""
from __future__ import annotations

import pytest
from helpers import choose, wait_for
from playwright.sync_api import expect

from simulator.personas import sets as persona_sets
from simulator.personas import store as persona_store
from testkit.scripted_server import start_server
from trainer.jobs import control as job_control
from trainer.jobs import queue as job_queue

pytestmark = [pytest.mark.browser, pytest.mark.model, pytest.mark.process, pytest.mark.slow]


@pytest.fixture
def browser_page(browser_page):
    """The lab opens on Live rollout; these tests begin on the Personas view."""
    browser_page.get_by_role("tab", name="Personas").click()
    return browser_page
WAIT_MS = 180_000  # the first lint and the preview load sentence and language models on a busy CPU
SET = "studio-24"


def _box(page, elem_id: str, value) -> None:
    box = page.locator(f"#{elem_id} input, #{elem_id} textarea").first
    box.fill(str(value))
    box.press("Tab")


def test_generate_accept_lint_preview_split_and_train(browser_page, lab_server, grid_rows, tiny_model_dir,
                                                      screenshot):
    page, store = browser_page, lab_server.store
    before = persona_store.count_profiles(store)

    # 1. Generate 24 for a spec (two needs, all three personalities) and accept them into a set.
    with start_server() as server:
        page.get_by_text("Generate personas with an LLM").click()
        page.locator("#gen-count input").fill("24")
        choose(page, "gen-needs", "Just listen to the venting (just_listen)")
        choose(page, "gen-needs", "Agree that I am not at fault (not_at_fault)")
        page.keyboard.press("Escape")
        page.locator("#gen-base-url textarea").fill(server.base_url)
        page.locator("#gen-model textarea").fill("scripted")
        page.click("#gen-start")
        try:
            expect(page.locator("#gen-progress-text")).to_contain_text("24 of 24 (finished): 24 pending",
                                                                       timeout=WAIT_MS)
        except AssertionError:  # say what the generation's job was doing (status, error, log) when it did not end
            detail = [job_queue.job_detail(store, j["id"], log_lines=60)
                      for j in job_queue.list_jobs(store, kind="personas")]
            raise AssertionError(f"the generation did not finish; its job: {detail}") from None
        page.click("#gen-accept-all")
        expect(page.locator("#gen-status")).to_contain_text("Accepted 24 persona(s).")
    page.locator("#gen-set-name textarea").fill(SET)
    page.click("#gen-make-set")
    expect(page.locator("#gen-status")).to_contain_text(f"Created set {SET} from generation")
    members = persona_sets.set_profiles(store, SET)
    assert len(members) == 24 and persona_store.count_profiles(store) == before + 24
    assert {p.need_category for p in members} == {"just_listen", "not_at_fault"}
    assert {p.personality for p in members} == {"negative", "passive", "avoidant"}
    expect(page.locator("#sets-table")).to_contain_text(SET)  # the Sets panel shows it at once

    # 2. Lint: the list's warnings column for every generated persona, then one in the editor.
    page.locator("#persona-search textarea").fill("Speaking style: short messages, dry")
    page.locator("#persona-search textarea").press("Enter")
    expect(page.locator("#persona-count")).to_contain_text(f"24 of {before + 24}", timeout=WAIT_MS)
    warnings = wait_for(lambda: [r[-1] for r in grid_rows(page, "persona-table")
                                 if len(r) > 1 and r[-1] != ""] or None, timeout=WAIT_MS / 1000)
    assert all(w.isdigit() for w in warnings)
    lena = next(p for p in members if p.name.startswith("Lena"))
    page.locator("#persona-search textarea").fill(lena.name)
    page.locator("#persona-search textarea").press("Enter")
    expect(page.locator("#persona-count")).to_contain_text(f"1 of {before + 24}")
    page.locator("#persona-table [role=gridcell]", has_text=lena.name).first.click()
    expect(page.locator("#persona-id textarea")).to_have_value(lena.id)
    page.click("#persona-lint")
    expect(page.locator("#persona-warnings")).to_contain_text("warning", timeout=WAIT_MS)
    shown = page.locator("#persona-warnings").inner_text()
    from app.views.personas import form_warnings

    expected = form_warnings(store, lena)
    assert ("no warnings" in shown) == (not expected)
    assert all(w.field in shown for w in expected)

    # 3. Preview the generated persona as it is in the form: a short dialogue, nothing stored.
    page.get_by_text("Preview dialogue (the form as it is, not saved)").click()
    page.locator("#preview-policy textarea").fill(str(tiny_model_dir))
    page.locator("#preview-turns input[type=number]").fill("2")
    page.locator("#preview-turns input[type=number]").press("Enter")
    page.click("#preview-run")
    expect(page.locator("#preview-status")).to_contain_text("Done:", timeout=WAIT_MS)
    expect(page.locator("#preview-chat")).to_contain_text(lena.first_line)
    expect(page.locator("#preview-plot .scatterlayer .trace")).to_have_count(1)

    # 4. Split the set 80/20 in the Sets panel: round(0.8 x 24) = 19 to train, stratified.
    page.locator("#persona-search textarea").fill("")
    page.locator("#persona-search textarea").press("Enter")
    choose(page, "sets-chosen", SET)
    page.locator("#sets-fraction input").fill("0.8")
    page.locator("#sets-seed input").fill("7")
    page.click("#sets-split")
    expect(page.locator("#sets-status")).to_contain_text(f"Split {SET} into {SET}-train (19) and {SET}-heldout (5)")
    train = persona_sets.set_summary(store, f"{SET}-train")
    assert train.params["seed"] == 7 and train.size == 19
    screenshot(page, "persona-studio-sets.png")

    # 5. Train on the train part from the Training view; the job records the set and its hash.
    page.get_by_role("tab", name="Training").click()
    # the form opens on the cpu-demo preset (GRPO, groups of 4): 4 dialogues make one group
    for elem, value in (("train-name", "studio-train"), ("train-model", tiny_model_dir), ("train-steps", 1),
                        ("train-dialogues_per_step", 4), ("train-minibatch_size", 2), ("train-micro_batch_size", 2),
                        ("train-max_turns", 1), ("train-max_new_tokens", 8), ("train-actor_lr", 0.0001)):
        _box(page, elem, value)
    _box(page, "train-extra", "critic_lr: 0.0001\nmax_dialogue_tokens: 512")
    _box(page, "train-persona_set", "set:no-such-set")  # checked against the store before anything starts
    page.click("#train-launch")
    expect(page.locator("#err-persona_set")).to_contain_text("no stored persona set named 'no-such-set'")
    assert job_queue.list_jobs(store, kind="train") == []  # (the generation above ran as a personas job)
    choose(page, "train-persona_set", f"set:{SET}-train")
    page.click("#train-launch")
    expect(page.locator("#train-launch-msg")).to_contain_text("Launched job #")
    job_id = job_queue.list_jobs(store, kind="train")[0]["id"]
    try:
        detail = wait_for(lambda: (d := job_queue.job_detail(store, job_id))["config"].get("personas") and d
                          or (d["status"] in ("failed", "cancelled", "interrupted") and d), timeout=WAIT_MS / 1000)
        assert detail["config"]["persona_set"] == f"set:{SET}-train", detail.get("error")
        assert detail["config"]["personas"] == {"spec": f"set:{SET}-train", "set": f"{SET}-train", "n": 19,
                                                "hash": train.content_hash}
    finally:
        job_control.cancel(store, job_id, force=True)
    assert page.dialogs == []
