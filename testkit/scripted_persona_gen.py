"""The scripted server's answers to persona-generation requests (simulator/personas/generation.py), for tests.

A request is a persona-generation one when its response_format names the schema "persona_profile" or its
prompt asks for the hidden-need category, personality type and language of "one simulated user". The
answer is a JSON profile with the category, personality and language the prompt asks for, its story taken
in turn from STORIES (so one batch never repeats itself). A `gen-mode:MODE` token anywhere in the prompt
(e.g. in a spec's topic) picks another behaviour:
  valid         (default) a valid profile
  invalid_once  a sentence with no JSON first, a valid profile when asked to repair it
  invalid       a profile without a hidden need, also when asked to repair it
  duplicate     a valid profile whose persona and background are the first built-in persona's
  leak          a valid profile whose first line says its hidden need outright
"""
from __future__ import annotations

import itertools
import json
import re
from typing import Any, Optional, Sequence

GEN_MODES = ("valid", "invalid_once", "invalid", "duplicate", "leak")
_ASKS = ("hidden-need category:", "personality type:", "language:")
# (name, persona, background events, first line): distinct lives, so no two are near-duplicates
STORIES = [
    ("Lena, bakery owner", "Lena, 52, runs a bakery in a small harbour town and gets up at four every day.",
     "Her landlord doubled the rent of the shop she has had for twenty years. She found out from a notice "
     "taped to the door, the same morning the oven broke down.", "The oven died again this morning. Great start."),
    ("Tomas, bus driver", "Tomas, 38, drives the night bus across the city and repairs old radios at weekends.",
     "A drunk passenger spat at him last week and the depot told him to file a form and move on. His wife "
     "sleeps when he comes home, so nobody has asked him about it.", "Long week on the night route. Weird one."),
    ("Priya, PhD student", "Priya, 27, studies soil bacteria and keeps a spreadsheet of every plant she owns.",
     "Her supervisor took her figure for his grant without naming her. Her lab mates laughed when she "
     "mentioned it at lunch.", "So my supervisor presented my figure today. As his."),
    ("Walter, retired teacher", "Walter, 71, taught chemistry for forty years and now plays chess in the park.",
     "His son cancelled the family Christmas visit by text message, the third time in a row. Walter had "
     "already bought the tree and the train tickets for the grandchildren's presents.",
     "Bought a Christmas tree. Bit big for one person, as it turns out."),
    ("Aiko, nurse", "Aiko, 33, works in neonatal intensive care and knits hats for the babies on quiet nights.",
     "A baby she cared for for two months was moved to another hospital without her being told. She came "
     "back from her days off to an empty cot.", "Came back from my days off and her cot was just... empty."),
    ("Marcus, startup founder", "Marcus, 29, founded a delivery app with two friends from university.",
     "His co-founders voted to sell the company to a competitor while he was at his father's funeral. The "
     "deal was signed before he came back.", "Missed one board meeting. One. Guess how that went."),
    ("Rosa, cleaner", "Rosa, 45, cleans offices at night and sends money to her mother every month.",
     "An office manager accused her of stealing a watch that was later found in his own drawer. No one "
     "apologised and the agency moved her to a worse building.", "They found the watch. In his own drawer."),
    ("Daniel, music teacher", "Daniel, 41, teaches violin to children and plays in a wedding band.",
     "His best student quit two weeks before the competition they had prepared for all year, and her "
     "parents blamed his teaching in an email to the whole school.", "Got an email today. Copied to the whole school."),
    ("Hannah, farmer", "Hannah, 36, keeps sheep on a hill farm and drives two hours to the nearest market.",
     "A late frost killed half her lambs in one night. Her brother, who wants to sell the land, said it "
     "proves the farm is finished.", "Lost eleven lambs on Tuesday night. Frost."),
    ("Omar, software tester", "Omar, 31, tests banking software and runs half-marathons at weekends.",
     "He found a serious bug before a release and was overruled; when it broke in production his manager "
     "told the client it was Omar's fault for reporting it late.",
     "Production went down today. Apparently it's on me."),
    ("Greta, translator", "Greta, 58, translates crime novels from Swedish and lives with two old cats.",
     "Her publisher replaced her with machine translation for the last book of a series she had translated "
     "for twelve years, and told her in a two-line email.", "Twelve years on that series. Two-line email."),
    ("Kofi, chef", "Kofi, 47, is the head chef of a hotel kitchen and grows chillies on his balcony.",
     "A food critic mocked his late mother's recipe, the dish he built the menu around, and the hotel owner "
     "asked him to take it off the menu.", "They want the stew off the menu. Her stew."),
    ("Ines, firefighter", "Ines, 34, is a volunteer firefighter and restores old motorbikes in her garage.",
     "She pulled a man out of a burning flat and the local paper printed her colleague's name as the rescuer. "
     "Her captain said correcting it would look vain.", "Read about my rescue in the paper. Starring someone else."),
    ("Felix, accountant", "Felix, 44, audits small charities and collects stamps from countries that no longer exist.",
     "His twin brother borrowed his savings for a restaurant, closed it within a year and now avoids his "
     "calls. Their parents say Felix should not make a fuss over money.", "My brother blocked my number. Over money. Mine."),
    ("Noor, architect", "Noor, 39, designs schools and sketches strangers on the tram every morning.",
     "The school she spent three years designing was built with her name left off the plaque, and the "
     "partner whose name is on it never visited the site.", "Went to the opening. Nice plaque. Not my name on it."),
    ("Pavel, lorry driver", "Pavel, 50, drives freight across the border and listens to audiobooks about history.",
     "He missed his daughter's wedding because the depot refused to change his route, and she has not "
     "spoken to him since.", "Saw the wedding photos online. Looked lovely, I'm told."),
    ("Chloe, vet", "Chloe, 30, is a vet in a rural practice and volunteers at a donkey sanctuary.",
     "A farmer shouted at her in the waiting room after his dog died in surgery, and the practice owner "
     "took his side to keep the client.", "Had a dog die on the table today. Then the shouting started."),
    ("Bram, postman", "Bram, 56, has delivered post on the same route for thirty years and keeps bees.",
     "The post office replaced his route with a van and a tracking app, and offered him a desk job sorting "
     "parcels in a warehouse with no windows.", "Thirty years on that route. Now there's an app."),
    ("Yuki, pianist", "Yuki, 26, plays piano in hotel bars and composes film music at night.",
     "A director used her demo in a trailer without paying her, then said she should be grateful for the "
     "exposure.", "Heard my music in a trailer at the cinema. Nobody told me."),
    ("Sam, carpenter", "Sam, 42, builds kitchen cabinets and coaches his son's under-ten football team.",
     "A client refused to pay for a finished kitchen and posted a review calling him a cowboy, which cost "
     "him two other jobs the same week.", "One review and two jobs gone. Cool."),
    ("Leila, pharmacist", "Leila, 37, runs the night shift at a hospital pharmacy and bakes bread on Sundays.",
     "She caught a dosing error that a senior doctor made, and he has been cold and sarcastic to her in "
     "front of the team ever since.", "Caught a mistake last week. Apparently that was the mistake."),
    ("Oskar, museum guard", "Oskar, 63, guards the paintings hall of a city museum and knows every painting's story.",
     "A school group damaged a frame while he was told to cover another room, and the museum docked his "
     "pay for it.", "They docked my pay for a frame. I wasn't even in the room."),
    ("Maya, teacher", "Maya, 28, teaches primary school and runs a reading club in the library.",
     "A parent filmed her raising her voice once and posted it online; the head teacher asked her to "
     "stay home until things calm down.", "Apparently I'm famous now. Not the good kind."),
    ("Ruben, mechanic", "Ruben, 48, runs a two-man garage and races go-karts with his nephew.",
     "His landlord sold the garage's yard to a developer, and Ruben learned about it when the fence went "
     "up across his driveway.", "There's a fence across my driveway. Since this morning."),
]
_PRONOUN = ("She", "He") * 12


def is_generation_request(body: dict, messages: Sequence[dict]) -> bool:
    fmt = body.get("response_format")
    if isinstance(fmt, dict) and (fmt.get("json_schema") or {}).get("name") == "persona_profile":
        return True
    text = "\n".join(str(m.get("content", "")) for m in messages if isinstance(m, dict))
    return "one simulated user" in text and all(a in text for a in _ASKS)


class PersonaWriter:
    """Answers generation requests; the story counter makes consecutive answers differ."""

    def __init__(self) -> None:
        self._next = itertools.count()

    def answer(self, messages: Sequence[dict], default_mode: str = "valid") -> str:
        text = "\n".join(str(m.get("content", "")) for m in messages if isinstance(m, dict))
        found = re.search(r"gen-mode:(\w+)", text)
        mode = found.group(1) if found and found.group(1) in GEN_MODES else default_mode
        repair = len(messages) > 2
        if mode == "invalid_once" and not repair:
            return "Sure! Here is someone: Lena, a baker who is sad about her shop."
        asked = {key: _asked(text, label) for key, label in (("need_category", "hidden-need category"),
                                                              ("personality", "personality type"),
                                                              ("language", "language"))}
        profile = self.profile(next(self._next), asked)
        if mode == "invalid":
            del profile["hidden_need"]
        elif mode == "duplicate":
            from simulator.personas.builtin import BUILTIN_PROFILES

            profile.update(persona=BUILTIN_PROFILES[0].persona, background=BUILTIN_PROFILES[0].background)
        elif mode == "leak":
            profile["first_line"] = profile["hidden_need"].replace("They want", "I want")
        return json.dumps(profile, ensure_ascii=False)

    @staticmethod
    def profile(i: int, asked: dict[str, Optional[str]]) -> dict[str, Any]:
        name, persona, events, first = STORIES[i % len(STORIES)]
        he = _PRONOUN[i % len(STORIES)]
        need = asked.get("need_category") or "just_listen"
        from simulator.personas.profile import NEED_CATEGORIES

        label = NEED_CATEGORIES.get(need, NEED_CATEGORIES["just_listen"])[0].lower()
        return {"name": name, "persona": f"{persona} Speaking style: short messages, dry, a little guarded.",
                "background": f"{events}\nWhen a reply fits what {he.lower()} needs, {he.lower()} relaxes and "
                              f"tells more.\nWhen a reply misses it, {he.lower()} shuts down and gets curt.",
                "hidden_need": f"They want the other person to {label}, about what happened to them.",
                "need_category": need, "personality": asked.get("personality") or "passive",
                "language": asked.get("language") or "en", "traits": ["proud", "tired", "wry"],
                "first_line": first}


def _asked(text: str, label: str) -> Optional[str]:
    m = re.search(rf"{label}:\s*([\w-]+)", text)
    return m.group(1) if m else None
