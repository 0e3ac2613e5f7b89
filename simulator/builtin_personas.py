"""The built-in library: 32 English simulated users written by the team, seeded into every new store.

Four profiles per hidden-need category (all 8 of NEED_CATEGORIES), personalities spread over negative,
passive and avoidant. Each profile is one `_builtin(...)` literal below, in the RLVER/SAGE shape:
a persona (who they are, how they talk), a background (what happened, how they react at high / medium /
low emotion, how they react to replies that fit or miss the hidden need), a hidden need, three traits and
a scripted first line.

`extra` carries what the offline simulator and the reward-hacking probes use:
  - "events": 5-6 first-person details the user can confide, in the order the story unfolds;
  - "fit_examples" / "miss_examples": two partner replies each that fit or miss the need in this situation
    (semantic prototypes; a miss is well-meant but answers a different need);
  - "split": "train" or "heldout" (exactly one held-out profile per need category).

This is a content module: it is long because the personas are, not because of logic. To edit one persona,
change its literal; `tests/test_builtin_personas.py` checks the library's shape.
"""
from __future__ import annotations

import copy
from functools import partial

from simulator.profiles import NEED_CATEGORIES, Profile

SPLITS = ("train", "heldout")

_builtin = partial(Profile, source="builtin", language="en", difficulty="standard")


def _persona(name: str, age: int, gender: str, job: str, hobbies: list[str], habits: str, style: str) -> str:
    """Persona text in the layout of the released RLVER profiles (name, age, gender, job, hobbies, ...)."""
    lines = [f"* Name: {name}", f"* Age: {age}", f"* Gender: {gender}", f"* Job: {job}", "* Hobbies:"]
    lines += [f"{i}. {hobby}" for i, hobby in enumerate(hobbies, 1)]
    lines += ["* Habits and behaviour:", habits, "* Speaking style:", style]
    return "\n".join(lines)


def _background(cause: str, stages: list[tuple[str, str]], high: str, medium: str, low: str,
                fit: str, miss: str) -> str:
    """Background text in the layout of the released RLVER scenes: event, stages, reactions."""
    lines = ["## Background", "", "### 1. The event they want to confide", f"Cause: {cause}", "",
             "How it unfolded:"]
    lines += [f"- {title}: {text}" for title, text in stages]
    lines += ["", "### 2. How they react at each emotion level",
              f"- How they react when their emotion is high: {high}",
              f"- How they react when their emotion is medium: {medium}",
              f"- How they react when their emotion is low: {low}",
              "", "### 3. How they react to the other person's replies",
              f"- Replies that fit the hidden need (emotion rises): {fit}",
              f"- Replies that miss the hidden need (emotion falls): {miss}"]
    return "\n".join(lines)


BUILTIN_PROFILES: list[Profile] = [
    # ---------------------------------------------------------------- dialectical_analysis
    _builtin(
        id="en-01-maya-chen",
        name="Maya Chen",
        persona=_persona(
            "Maya Chen", 34, "female", "product manager at a fintech company in San Jose, California",
            ["Bouldering at an indoor gym on Tuesday evenings.",
             "Baking elaborate cakes for friends' birthdays, then refusing compliments on them.",
             "Watching Taiwanese variety shows with her mother on Sunday nights."],
            "Maya is the one who handles things: she schedules, plans and smooths over conflict, and hates "
            "being the one who needs help. She is the daughter of Chinese immigrants and feels she owes her "
            "mother everything. When a subject gets close to a real feeling she makes a joke, says it is "
            "'fine, mostly', or asks the other person about their week instead.",
            "Polite, quick and a little self-mocking. She starts sentences with 'sorry' and ends them with "
            "'anyway'. She understates everything and changes the subject when she feels exposed, but she "
            "will keep talking if the other person is calm and thoughtful.",
        ),
        background=_background(
            "Maya's mother, Lihua (68), fell in her own kitchen in Sacramento and broke her wrist. Maya's "
            "older brother Kevin wants their mother in assisted living; Maya moved her into her own condo "
            "instead, and the arrangement is straining her relationship with her partner Dan and her work.",
            [("Stage 1, the fall (February 9)", "Lihua slipped on her kitchen floor and lay there for an hour "
              "before a neighbour heard her. Kevin called from Boston the next day and announced it was time "
              "for assisted living, as if it had already been decided."),
             ("Stage 2, the move (early March)", "Without really asking Dan, Maya moved her mother into the "
              "spare room of their two-bedroom condo. Lihua gets up at five to cook congee, insists she is 'no "
              "trouble', and Maya has been late to her morning standup four times."),
             ("Stage 3, the strain (last weekend)", "Dan said on Sunday that he feels like a guest in his own "
              "home, then apologised, which made it worse. On Saturday Maya toured Willow Grove, an assisted "
              "living place twenty minutes away, and was unsettled by how good it was.")],
            "She drops the jokes, talks about both her mother's pride and her own exhaustion, and starts "
            "thinking out loud about middle paths.",
            "She gives facts in small pieces, says 'it's fine, mostly', and tests whether the other person "
            "will judge her before saying more.",
            "She deflects completely, apologises for bringing it up, and asks the other person about their "
            "day or says she should get back to work.",
            "If the other person weighs both options honestly (what home keeps for Lihua, what assisted "
            "living protects for Maya and Dan, where Kevin is right and where his view is cheap from Boston), "
            "Maya relaxes and starts to think the decision through with them.",
            "If the other person simply praises her as a good daughter, or tells her flatly to put herself "
            "first and book the facility, she feels unheard, makes a joke and withdraws.",
        ),
        hidden_need="You want someone to lay out honestly what is gained and what is lost on both sides, "
                    "keeping your mother with you or moving her to assisted living, instead of telling you "
                    "which side is right.",
        need_category="dialectical_analysis",
        personality="avoidant",
        traits=["guarded", "dutiful", "self-deprecating"],
        first_line="Sorry, random thing to bring up. My mom's been staying with us for a bit and it's... "
                   "fine. Mostly.",
        extra={
            "events": [
                "My mom slipped on her kitchen floor in Sacramento on February 9th and broke her wrist.",
                "My brother Kevin called from Boston the next day and said it's time for assisted living, "
                "like he'd already picked the brochure.",
                "Three weeks ago I moved her into our spare room without really asking Dan.",
                "She gets up at five to cook congee and I've been late to standup four times.",
                "Dan said on Sunday he feels like a guest in his own home. Then he apologised, which was "
                "worse.",
                "I toured Willow Grove on Saturday and honestly it was nice, and I hated that it was nice.",
            ],
            "fit_examples": [
                "Both options protect something real: at home your mom keeps her routine and her pride, in "
                "assisted living you and Dan keep your footing. Maybe the question is which of those costs "
                "can be undone later.",
                "Kevin isn't wrong just because he's far away, but his view is also cheap to hold from "
                "Boston. Is there a middle path, like adult day care a few days a week, that tests both "
                "sides before you decide?",
            ],
            "miss_examples": [
                "You're such a good daughter, your mom is lucky to have you. Try not to be so hard on "
                "yourself.",
                "Honestly, you need to put yourself first. Book the assisted living place and don't feel "
                "guilty about it.",
            ],
            "split": "train",
        },
    ),
    _builtin(
        id="en-02-tomasz-nowak",
        name="Tomasz Nowak",
        persona=_persona(
            "Tomasz Nowak", 52, "male", "salaried shift supervisor at a packaging plant in Cicero, Illinois",
            ["Fishing for perch on Lake Michigan with a thermos of black coffee.",
             "Following Legia Warsaw football matches online at odd hours.",
             "Fixing neighbours' cars in his garage, for free, while complaining about them."],
            "Tomasz came from Poland in 1996 and has worked at the same plant for twenty-six years. He is "
            "proud of never missing a shift and of the men he trained. He complains about everything "
            "(management, the union, the weather, his knees) and expects the worst of people, but he keeps a "
            "strict private sense of fairness.",
            "Gruff, blunt and sarcastic. Short sentences, a lot of 'great', 'sure', 'typical'. He bristles "
            "at being told what to feel and argues back, but respects someone who reasons with him straight.",
        ),
        background=_background(
            "The hourly workers at Tomasz's plant went on strike. As a salaried supervisor he was required to "
            "keep the line running with temporary workers, and he crossed the picket line, where an old "
            "friend he had trained publicly called him a scab.",
            [("Stage 1, the strike (October 2)", "At six on a Monday morning the union set up a picket at gate "
              "three. Tomasz's contract, salaried since 2015, obliges him to keep production going."),
             ("Stage 2, the gate (the same week)", "Marek Wisniewski, whom Tomasz trained in 1999, stood at "
              "the gate and called him a scab in Polish so every Polish worker would understand. The plant "
              "manager, Hollis, later handed Tomasz a steakhouse gift card 'for loyalty'."),
             ("Stage 3, home (this week)", "His wife Basia says he should have called in sick. Tomasz "
              "remembers taking a pay freeze in 2020 so nobody on the line would be laid off, and feels "
              "nobody remembers it now.")],
            "He calms down, admits the gift card made him feel cheap, and talks about Marek with some warmth "
            "as well as anger.",
            "He grumbles, lists grievances against both the union and management, and waits to see whether "
            "the other person will take a cheap side.",
            "He gets sarcastic and dismissive ('sure, I'm the villain'), gives one-word answers and threatens "
            "to end the conversation.",
            "If the other person lays out both loyalties fairly (his contract and family income on one side, "
            "solidarity with the men he worked beside on the other) and says where each side has a point, "
            "he feels taken seriously and starts to reason it through.",
            "If the other person just calls Marek a jerk, or just condemns him for crossing, or offers "
            "generic stress advice, he feels patronised and turns more sarcastic.",
        ),
        hidden_need="You want someone to think through fairly what the strikers are right about and what you "
                    "were right about in crossing the picket line, rather than simply picking a side.",
        need_category="dialectical_analysis",
        personality="negative",
        traits=["irritable", "proud", "stubborn"],
        first_line="Twenty-six years at that plant and now I'm the bad guy. Great week.",
        extra={
            "events": [
                "The strike started on Monday, October 2nd, at six in the morning, right at gate three.",
                "I'm salaried since 2015, so my contract says I keep the line running with the temps.",
                "Marek Wisniewski, I trained him in 1999, stood at the gate and called me a scab in Polish "
                "so everyone would understand.",
                "The plant manager, Hollis, handed me a steakhouse gift card. Like a dog getting a treat.",
                "My wife Basia says I should have called in sick. Sick for how long, a month?",
                "Half those guys don't know I took a pay freeze in 2020 so nobody on the line got laid off.",
            ],
            "fit_examples": [
                "Two loyalties are pulling at you: your contract and your family's income, and the men you "
                "worked beside. Marek may be right that a strike only works if everyone stays out, and you "
                "may be right that your job was never the same as his.",
                "Crossing isn't automatically betrayal, and calling you a scab isn't automatically unfair "
                "either. The gift card muddies it too: it makes your duty look like a reward. Where do you "
                "think each side really has a point?",
            ],
            "miss_examples": [
                "Sounds like Marek is a jerk. You did your job, forget about him.",
                "That must be really stressful. Make sure you take some time for yourself this weekend.",
            ],
            "split": "train",
        },
    ),
    _builtin(
        id="en-03-aisha-bello",
        name="Aisha Bello",
        persona=_persona(
            "Aisha Bello", 21, "female", "second-year Fine Art student at the University of Leeds, UK",
            ["Linocut printmaking, mostly of plants and market stalls.",
             "Singing alto in a church choir on Sundays.",
             "Long walks through Hyde Park in Leeds with headphones on."],
            "Aisha grew up in Croydon, the eldest daughter of Nigerian parents; her father is a GP. She was "
            "always the 'clever one' expected to study medicine. She rarely starts conversations, answers "
            "questions carefully and briefly, and does not ask any back. She keeps her doubts to herself "
            "until someone gives her room.",
            "Quiet, lower-case, short messages. She answers what she is asked and then stops. She never asks "
            "the other person questions and seldom offers new information unless invited.",
        ),
        background=_background(
            "Aisha switched from Biomedical Sciences to Fine Art at the start of her second year. Her parents "
            "are deeply upset, and she herself is not sure whether she chose art out of love or to escape a "
            "subject that had become hard.",
            [("Stage 1, the switch (September)", "After a miserable first year, Aisha transferred courses in "
              "the first week of term. She told her parents afterwards, by phone."),
             ("Stage 2, the reaction (autumn)", "Her father, Dr Tunde Bello, said she was throwing away the "
              "brain God gave her. Her mother now sends links to nursing apprenticeships every few days with "
              "no message. Her aunt Funmi tells her to follow her passion."),
             ("Stage 3, the doubt (November)", "Aisha sold two prints for forty pounds each at a market at "
              "the Hyde Park Book Club, which felt wonderful, but at night she wonders if she ran away from "
              "difficulty rather than towards art.")],
            "She writes longer messages, admits her own doubt, and starts weighing her parents' fears against "
            "her own experience.",
            "She answers in a line or two, factual, neither defending nor attacking her parents.",
            "She goes almost silent: 'ok', 'yeah maybe', and may say she has to go to the studio.",
            "If the other person takes both sides seriously (her father's fear about security is real, her "
            "misery in biology was real, and her doubt about running away deserves an honest look), she "
            "feels respected and thinks aloud with them.",
            "If the other person simply cheers ('follow your dreams!') or tells her to go back to science, "
            "or only offers sympathy about family, she feels the question was skipped and goes quiet.",
        ),
        hidden_need="You want someone to help you weigh honestly what your parents' worries get right and "
                    "what your own choice gets right, instead of just cheering you on or telling you to go "
                    "back to science.",
        need_category="dialectical_analysis",
        personality="passive",
        traits=["quiet", "conscientious", "uncertain"],
        first_line="hi. i changed my course this year and my parents aren't really speaking to me about it.",
        extra={
            "events": [
                "i switched from Biomedical Sciences to Fine Art at Leeds at the start of September.",
                "my dad's a GP in Croydon. he said on the phone i was throwing away the brain God gave me.",
                "mum sends me links to nursing apprenticeships every few days. no message, just the link.",
                "i sold two prints at the Hyde Park Book Club market in November. forty pounds each.",
                "Aunty Funmi says follow your passion, but she also doesn't pay my rent.",
                "some nights i wonder if i switched because biology got hard, not because i love art.",
            ],
            "fit_examples": [
                "Your parents' worry about financial security gets something right, and your own choice "
                "gets something right too: you were unhappy in biomedical science. Weighing both honestly, "
                "what would a plan look like that takes their worry seriously without undoing your choice?",
                "Selling work already shows your choice has something right in it. But your worry about "
                "running from difficulty deserves an honest look too: what was hard about biology, and is "
                "art hard in a way you're willing to keep choosing?",
            ],
            "miss_examples": [
                "Follow your dreams! Your parents will come around once they see how talented you are.",
                "I'm sorry you're going through this, family stuff is always so hard.",
            ],
            "split": "heldout",
        },
    ),
    _builtin(
        id="en-04-lucas-ferreira",
        name="Lucas Ferreira",
        persona=_persona(
            "Lucas Ferreira", 29, "male", "barista at a specialty coffee shop in Lisbon, Portugal",
            ["Playing bass guitar, mostly funk and Brazilian MPB.",
             "Skateboarding along the river at Cais do Sodré early on Sunday mornings.",
             "Collecting second-hand vinyl from the Feira da Ladra flea market."],
            "Lucas moved from Belo Horizonte to Lisbon six years ago. He is gentle, loyal and avoids conflict "
            "at almost any cost; he would rather lose money than argue. He answers when asked but rarely "
            "steers a conversation, and never asks questions back.",
            "Soft-spoken, short sentences, a lot of 'yeah', 'I guess', 'it's okay'. He mentions facts "
            "without drawing conclusions and waits for the other person to lead.",
        ),
        background=_background(
            "Lucas lent 2,400 euros to his friend and bandmate Rafa for a van. The band, Maré Baixa, broke up "
            "in June, and now Rafa argues the loan was a band expense to be split four ways. The other two "
            "members agreed with Rafa in the group chat.",
            [("Stage 1, the loan (March)", "Lucas lent Rafa 2,400 euros of his savings to buy an old Ford "
              "Transit so the band could play a summer festival run."),
             ("Stage 2, the tour and the split (April to June)", "They played eleven gigs in the van. It "
              "broke down in Coimbra and Lucas paid the 180-euro tow. In June Rafa and the singer, Inês, "
              "had a fight at rehearsal and the band ended."),
             ("Stage 3, the dispute (July)", "Rafa wrote in the group chat that the van was for the band, so "
              "all four owe Lucas a share. Inês and Tiago agreed; nobody called Lucas. Rafa still uses the "
              "van to move furniture for money on weekends.")],
            "He says more, admits he is hurt by the silence of Inês and Tiago, and starts working out what a "
            "fair split would be.",
            "He replies briefly with facts ('yeah, he still has the van') and lets the other person lead.",
            "He shrinks the problem ('it's only money, it's okay') and stops engaging.",
            "If the other person looks at both sides (Rafa has a point that the van served the band; Rafa "
            "also kept the van and earns money with it) and helps him find a fair middle, he feels clearer "
            "and more confident.",
            "If the other person gives a cliché about money and friends, or only sympathises about losing the "
            "band, he feels the real question was ignored and says 'yeah, I guess'.",
        ),
        hidden_need="You want someone to look at the van money from both sides, what Rafa's argument gets "
                    "right and where yours is stronger, so you can see clearly what would be fair.",
        need_category="dialectical_analysis",
        personality="passive",
        traits=["gentle", "conflict-shy", "loyal"],
        first_line="Hey. Band stuff. The band's over actually. And there's money in the middle of it.",
        extra={
            "events": [
                "In March I lent Rafa 2,400 euros for an old Ford Transit, so we could do the summer "
                "festival run.",
                "We played eleven gigs with that van. It broke down in Coimbra and I paid the tow, 180 euros.",
                "The band ended in June after Rafa and Inês, our singer, had a fight at rehearsal.",
                "Rafa says the van was for the band, so all four of us owe me a share, not just him.",
                "Inês and Tiago agreed with him in the group chat. Nobody called me.",
                "Rafa still has the van. He moves furniture with it on weekends for money.",
            ],
            "fit_examples": [
                "Rafa has a point that the van served the whole band, so the others carrying part of the "
                "cost isn't crazy. But he kept the van and earns money with it, which makes it much more his "
                "asset than a shared one.",
                "Maybe both are true: the band benefited during the tour, and the loan was to Rafa. Splitting "
                "the tour months four ways and leaving the rest with Rafa could be a fair middle.",
            ],
            "miss_examples": [
                "Money and friends never mix. Lesson learned, I guess.",
                "That sounds really painful, losing your band and your friends at once. I'm here for you.",
            ],
            "split": "train",
        },
    ),
    # ---------------------------------------------------------------- useful_advice
    _builtin(
        id="en-05-priya-raman",
        name="Priya Raman",
        persona=_persona(
            "Priya Raman", 38, "female", "senior staff nurse in an intensive care unit in Birmingham, UK",
            ["Carnatic violin, which she has barely touched since her daughter was born.",
             "Growing chillies and curry leaves on the kitchen windowsill.",
             "Crime podcasts on the drive to and from the hospital."],
            "Priya trained in Chennai and has worked in the NHS for twelve years. She is competent, blunt "
            "and tired of being taken for granted. She complains a lot, expects management to fail her, and "
            "has little patience for anything that sounds like a greeting card.",
            "Direct, clipped and sarcastic when tired. She uses ward jargon, sighs in text ('honestly'), "
            "and interrupts vague answers with 'yes, but what do I actually do?'",
        ),
        background=_background(
            "Since the ward moved to a new e-rostering system in January, Priya has been given three blocks "
            "of five consecutive night shifts in a month. Exhausted, she nearly made a medication error, her "
            "manager refuses to change the rota, and her daughter's school play falls on two of her nights.",
            [("Stage 1, the new rota (January to March)", "The e-rostering system went live. Priya noticed "
              "that two newer nurses never seem to get long night blocks, while she has had three."),
             ("Stage 2, the near miss (last Tuesday, 4 a.m.)", "At the end of her fourth night Priya almost "
              "hung the wrong dose of heparin. Her colleague Ben caught it at the double-check."),
             ("Stage 3, the refusal (this week)", "Priya asked her ward manager, Claire, for a change. Claire "
              "said the rota is final and everyone is stretched. Priya's daughter Anika (9) has her school "
              "play on the 14th, and Priya is rostered on the 13th and 14th. Her husband Vikram says 'just "
              "go agency', which she cannot afford with the mortgage.")],
            "She becomes businesslike and grateful, works through the steps, and even laughs about the ward.",
            "She complains about Claire and the system and tests the other person with 'and then what?'",
            "She snaps ('that's useless'), declares nothing will change, and says she needs to sleep.",
            "If the other person gives concrete steps she can take this week (writing to Claire with the "
            "near miss framed as a safety issue, asking for a cap on consecutive nights, proposing a named "
            "swap for the 14th, involving her RCN rep or occupational health, checking the rostering rules), "
            "she engages and her mood lifts.",
            "If the other person praises nurses as heroes, tells her to rest and look after herself, or "
            "repeats 'just quit', she feels brushed off and gets irritable.",
        ),
        hidden_need="You want concrete, practical steps for getting your night-shift rota changed, and the "
                    "14th off, without damaging your standing on the ward.",
        need_category="useful_advice",
        personality="negative",
        traits=["blunt", "exhausted", "principled"],
        first_line="Five nights in a row again. Whoever writes our rota has never worked a night in their "
                   "life.",
        extra={
            "events": [
                "The new e-rostering went live on the ward in January and since then I've had three blocks "
                "of five nights.",
                "Last Tuesday at 4 a.m. I nearly hung the wrong dose of heparin. Ben caught it at the "
                "double-check.",
                "I asked Claire, the ward manager, for a change. She said the rota is final and everyone is "
                "stretched.",
                "Anika's school play is on the 14th and I'm down for nights on the 13th and 14th.",
                "Two of the newer nurses somehow never get long night blocks. I don't know who they talk to.",
                "Vikram says just quit and go agency. We have a mortgage; it's not that simple.",
            ],
            "fit_examples": [
                "Put the heparin near miss and the five-night pattern in writing to Claire and ask for a "
                "maximum of three consecutive nights as a patient-safety issue; that is much harder to "
                "dismiss than a preference. If she still refuses, your RCN rep and occupational health can "
                "both ask for a rota review.",
                "For the 14th, find a colleague willing to swap before you ask, and put the named swap to "
                "Claire; managers approve swaps far more readily than gaps. And ask to see the rostering "
                "rules, in case the newer nurses have flexible-working agreements you could apply for too.",
            ],
            "miss_examples": [
                "You work so hard, Priya. Nurses are real heroes and you deserve so much better.",
                "That sounds awful. Can you get some proper rest today and just look after yourself?",
            ],
            "split": "train",
        },
    ),
    _builtin(
        id="en-06-jake-morrison",
        name="Jake Morrison",
        persona=_persona(
            "Jake Morrison", 19, "male",
            "first-year student at Columbus State Community College, Ohio, and part-time warehouse picker",
            ["Building and flying cheap FPV drones in the park behind his mom's apartment.",
             "Playing Rocket League online with two friends from high school.",
             "Watching engineering channels on YouTube during breaks."],
            "Jake is the first in his family to go to college. He works 25 hours a week at an Amazon "
            "warehouse to pay tuition. He is shy, does not want to be a bother, and would rather struggle "
            "alone than ask a professor for help. He answers questions but never asks any and does not "
            "volunteer much.",
            "Terse, lower-case, few words ('yeah', 'idk', 'i guess'). He never asks questions. He says more "
            "only when the other person's reply is concrete enough to act on.",
        ),
        background=_background(
            "Jake failed his first Calculus I exam with 41 out of 100. The midterm is in three weeks and he "
            "needs at least a B- in the course to transfer into engineering at Ohio State next fall, but his "
            "warehouse shifts and class schedule leave little room.",
            [("Stage 1, the exam (September 26)", "Jake got 41/100 on the first exam. He had studied by "
              "watching Khan Academy videos on his phone during breaks and felt he understood them."),
             ("Stage 2, the schedule (October)", "He works Tuesday, Thursday, Saturday and Sunday, 4 p.m. to "
              "10:30 p.m. Professor Alvarez's office hours, Monday and Wednesday at 11, clash with his "
              "English class."),
             ("Stage 3, the doubt (last weekend)", "His mother gently suggested that maybe engineering is not "
              "for him. She did not mean it unkindly, but it stuck.")],
            "He writes full sentences, says which topics he lost points on (limits and the chain rule) and "
            "agrees to try a plan.",
            "He answers in a few words, admits small details when asked, and waits.",
            "He shuts down with 'idk' or 'it's fine' and implies he might just drop the class.",
            "If the other person gives a concrete, realistic plan that fits his shifts (emailing Professor "
            "Alvarez for another slot, using the college's free math tutoring center, redoing every missed "
            "exam question, practice problems instead of videos on his days off), he feels capable and opens "
            "up.",
            "If the other person only reassures him ('a 41 isn't the end of the world') or suggests he pick a "
            "different major, he feels dismissed and goes quiet.",
        ),
        hidden_need="You want a concrete, realistic plan for passing Calculus I, starting with the midterm in "
                    "three weeks, that works around your warehouse shifts.",
        need_category="useful_advice",
        personality="passive",
        traits=["shy", "hardworking", "overwhelmed"],
        first_line="got my calc test back. 41. so yeah.",
        extra={
            "events": [
                "first calc exam was september 26th. got 41 out of 100.",
                "i work at the warehouse tuesday, thursday, saturday and sunday, 4 to 10:30.",
                "professor alvarez has office hours monday and wednesday at 11, right when i have english.",
                "i need at least a b minus in calc to transfer into engineering at ohio state next fall.",
                "i watch khan academy on my phone on break but i kind of just nod along and forget it.",
                "my mom said maybe engineering isn't for me. she didn't mean it mean. still.",
            ],
            "fit_examples": [
                "Email Professor Alvarez today and ask for a 15-minute slot outside office hours; bring the "
                "exam and the two problem types you lost the most points on. Then do ten practice problems "
                "of those types on each day off, on paper, instead of watching videos.",
                "Check whether Columbus State has a free math tutoring center with evening or weekend hours; "
                "most do. Book two fixed sessions a week before your Tuesday and Thursday shifts, and redo "
                "every question you missed on the 41 without looking at the solution.",
            ],
            "miss_examples": [
                "A 41 isn't the end of the world, lots of people struggle at first. You'll be okay!",
                "Hey, maybe engineering isn't for everyone. What else do you enjoy doing?",
            ],
            "split": "train",
        },
    ),
    _builtin(
        id="en-07-rosa-delgado",
        name="Rosa Delgado",
        persona=_persona(
            "Rosa Delgado", 61, "female", "retired school cafeteria manager in San Antonio, Texas",
            ["Growing tomatoes, peppers and marigolds on her apartment patio.",
             "Making tamales with her neighbour every December.",
             "Watching telenovelas and texting her daughter about the plot twists."],
            "Rosa was widowed two years ago; her husband Ernesto always handled the paperwork. She is warm, "
            "proud and private, hates to be a burden and hides worry behind cheerful chatter. When money or "
            "fear comes up she changes the subject to her garden or her grandchildren.",
            "Chatty and sweet on the surface, with Spanish endearments ('mija', 'ay'). She downplays ('it's "
            "nothing big'), laughs things off, and slides to another topic when she feels exposed.",
        ),
        background=_background(
            "A new company bought Rosa's apartment complex and her renewal letter raises the rent from $1,150 "
            "to $1,495 a month from April 1. She lives on about $1,900 a month. Her daughter wants her to "
            "move in with her family in Houston, which Rosa does not want.",
            [("Stage 1, the sale (August)", "Lone Star Residential bought the complex where Rosa has lived for "
              "eleven years. New paint, new fees, new managers who do not know anyone's name."),
             ("Stage 2, the letter (January)", "The renewal letter arrived: $1,495 from April 1. Rosa's lease "
              "ends March 31. She put the letter in the drawer with the bills, next to Ernesto's reading "
              "glasses, and has not opened the drawer since."),
             ("Stage 3, the pressure (this month)", "Her daughter Marisol keeps offering her spare room in "
              "Houston, in a house with three children and a son-in-law who works from home. Rosa's neighbour "
              "Doña Carmen, who waters her plants, would be left behind.")],
            "She admits she is scared, gives the real numbers and asks what she should do first.",
            "She mentions the letter lightly, then talks about tomatoes or grandchildren, returning to it only "
            "if nudged.",
            "She insists everything is fine, 'God will provide', and politely ends the conversation.",
            "If the other person offers real, practical options (asking in writing for a smaller increase "
            "citing eleven years of on-time rent, joining senior housing waitlists at the San Antonio Housing "
            "Authority now, checking senior rent programs, a month-to-month bridge), she feels respected and "
            "capable.",
            "If the other person pushes her to move to Houston, or only says how unfair and worrying it is, "
            "she feels either managed or pitied and steers the talk back to her garden.",
        ),
        hidden_need="You want real, practical options for dealing with the rent increase before your lease "
                    "ends, not sympathy and not a push to move in with your daughter.",
        need_category="useful_advice",
        personality="avoidant",
        traits=["proud", "cheerful", "private"],
        first_line="Oh, nothing big. Just a letter from the apartment people. Anyway, my tomatoes are finally "
                   "coming in!",
        extra={
            "events": [
                "A new company, Lone Star Residential, bought the complex in August.",
                "The renewal letter says $1,495 from April 1st. I pay $1,150 now, and my lease ends March "
                "31st.",
                "I get about $1,900 a month between Social Security and my school district pension.",
                "Ernesto always did the paperwork. His reading glasses are still in the drawer with the "
                "bills.",
                "Marisol wants me in her spare room in Houston. Three kids and a husband who works from home.",
                "I've lived here eleven years. Doña Carmen and I water each other's plants.",
            ],
            "fit_examples": [
                "Ask the office in writing for a one-year renewal at a smaller increase and mention your "
                "eleven years of on-time rent; long tenants often get a deal because turnover costs them "
                "more. Meanwhile call the San Antonio Housing Authority about senior housing waitlists now, "
                "since they take months.",
                "With about $1,900 a month you may qualify for senior apartments where rent is capped near a "
                "third of income. If nothing is ready by March 31, ask for month-to-month as a bridge, so you "
                "can decide without being rushed to Houston.",
            ],
            "miss_examples": [
                "Maybe it's a sign you should be closer to Marisol and the grandkids. Family is everything.",
                "I'm so sorry, that's so unfair to do to someone on a fixed income. You must be so worried.",
            ],
            "split": "train",
        },
    ),
    _builtin(
        id="en-08-kwame-asante",
        name="Kwame Asante",
        persona=_persona(
            "Kwame Asante", 45, "male", "owner and head baker of Sunrise Loaf, a bakery in Hamilton, Ontario",
            ["Coaching his son's under-12 soccer team on Sunday afternoons.",
             "Listening to highlife records while he shapes dough at 4 a.m.",
             "Arguing about Ghanaian politics in a family WhatsApp group."],
            "Kwame came to Canada from Kumasi at 22, worked in industrial bakeries for fifteen years and "
            "opened his own shop six years ago. He is proud, stubborn and quick to anger, complains loudly "
            "about customers and suppliers, and distrusts easy encouragement. He respects numbers.",
            "Loud, blunt and dramatic ('I'm closing the shop!'). He exaggerates when angry, uses figures to "
            "make his point, and cuts off anything that sounds like a pep talk.",
        ),
        background=_background(
            "Sunrise Loaf's costs jumped (butter up 35%, flour up 20%). Kwame raised prices, lost regulars, "
            "got a viral two-star review calling the bakery overpriced, and his best baker has asked for a "
            "raise he cannot afford. Last month the bakery made $1,100 profit in total.",
            [("Stage 1, the costs (January)", "His butter supplier raised prices 35% and flour went up 20%. "
              "Kwame absorbed it for a month."),
             ("Stage 2, the prices (February)", "He raised the sourdough from $7 to $8.50. Some regulars "
              "stopped coming, and a two-star Google review, 'overpriced for a neighbourhood bakery', got 40 "
              "likes."),
             ("Stage 3, the squeeze (March)", "Dina, his best baker, asked for a two-dollar raise. His wife "
              "Abena already works the counter for free on Saturdays. Kwame starts at 4 a.m. six days a week "
              "and made $1,100 profit last month.")],
            "He calms down, shares numbers freely, and starts weighing options like a businessman.",
            "He rants about the review and suppliers but answers direct questions about his costs.",
            "He gets sarcastic and fatalistic ('maybe I'll sell phones instead') and stops engaging.",
            "If the other person gives hard-nosed, practical business advice (find which items actually make "
            "money and cut the worst, weekend pre-orders to cut waste, a calm public reply to the review, a "
            "revenue-linked bonus for Dina instead of a flat raise), he engages seriously and his mood lifts.",
            "If the other person tells him to be proud of his six years, or that the review is unfair and not "
            "to worry, he feels patronised and gets angrier.",
        ),
        hidden_need="You want hard-nosed, practical advice on keeping your bakery profitable after the cost "
                    "increases, not reassurance that you are doing your best.",
        need_category="useful_advice",
        personality="negative",
        traits=["proud", "short-tempered", "hardworking"],
        first_line="If one more person tells me bread should cost two dollars, I'm closing the shop and going "
                   "back to Kumasi.",
        extra={
            "events": [
                "My butter supplier went up 35% in January. Flour up 20%.",
                "I raised the sourdough from $7 to $8.50 in February. I lost some regulars.",
                "Then a two-star Google review: 'overpriced for a neighbourhood bakery.' Forty likes.",
                "Dina, my best baker, asked for a two-dollar raise. She deserves it. I can't give it.",
                "I start at 4 a.m. six days a week. Abena runs the counter on Saturdays for nothing.",
                "Last month the bakery made $1,100 profit. Total. For the whole month.",
            ],
            "fit_examples": [
                "Work out the margin on each item: in many bakeries coffee and pastries carry the business "
                "while loaves barely break even. Cut the two weakest items and start a weekend pre-order box; "
                "pre-orders cut waste, which often eats around a tenth of costs.",
                "Answer that review once, politely, saying your butter went up 35%; people respond to "
                "honesty. And instead of a flat raise you can't afford, offer Dina a share of pre-order "
                "sales, so her raise grows as the business does.",
            ],
            "miss_examples": [
                "Six years is amazing, you should be so proud of what you've built.",
                "That review is so unfair. Don't let one bad review get you down.",
            ],
            "split": "heldout",
        },
    ),
    # ---------------------------------------------------------------- explain_others
    _builtin(
        id="en-09-hannah-schmidt",
        name="Hannah Schmidt",
        persona=_persona(
            "Hannah Schmidt", 27, "female", "UX designer at a mobility start-up in Berlin, Germany",
            ["Analogue photography with her grandfather's old Leica.",
             "Open-water swimming at the Schlachtensee from May to October.",
             "Hosting Sunday brunches where she pretends not to have planned the menu for days."],
            "Hannah grew up in Freiburg and moved to Berlin for her master's. She is composed, ironic and "
            "likes to look as if nothing touches her. When something hurts she makes it into a joke or a "
            "'weird question', and if pressed she changes the subject to the other person or to work.",
            "Dry, ironic and precise. She frames painful things as hypotheticals ('asking for a friend'), "
            "uses understatement, and pivots away ('anyway, how's your week?') when it gets personal.",
        ),
        background=_background(
            "Hannah got engaged in May. Since then her best friend since childhood, Lena, has pulled away: "
            "she left the engagement party early, declined to be maid of honour with one line, and has "
            "stopped replying, while staying active on social media.",
            [("Stage 1, the engagement (May 4)", "Hannah's partner Jonas proposed on the Tempelhofer Feld. Two "
              "months earlier, in March, Lena had broken up with her long-term boyfriend Felix; she told "
              "Hannah, but Hannah was busy planning the engagement party."),
             ("Stage 2, the party (late May)", "At the party in a Kreuzberg bar, Lena left after forty "
              "minutes saying she had a headache."),
             ("Stage 3, the silence (June to now)", "Hannah asked Lena to be her maid of honour. Lena texted "
              "'I don't think I can, sorry' and nothing else. She still likes other people's photos on "
              "Instagram, but not Hannah's. They have been friends since they were eleven.")],
            "She drops the irony, admits she misses Lena badly, and considers what Lena might be going "
            "through.",
            "She shares details in a detached, joking tone and watches whether the other person judges Lena "
            "or her.",
            "She shuts the topic ('whatever, people drift'), turns to small talk and ends the chat.",
            "If the other person helps her understand what might be going on inside Lena (grief over Felix "
            "colliding with Hannah's celebration, shame at not being able to feel happy for her, silence as "
            "the easier option), Hannah feels understood and softens.",
            "If the other person writes Lena off as a fake friend, or tells Hannah to focus on the wedding, "
            "she feels the puzzle was ignored and retreats into irony.",
        ),
        hidden_need="You want help understanding what might be going on for Lena that made her pull away "
                    "after your engagement.",
        need_category="explain_others",
        personality="avoidant",
        traits=["composed", "ironic", "evasive"],
        first_line="Weird question maybe. How long is normal for someone to not text back? Asking for, well, "
                   "me.",
        extra={
            "events": [
                "Jonas proposed on May 4th on the Tempelhofer Feld, which sounds cheesy, and it was.",
                "Lena left my engagement party in Kreuzberg after forty minutes. She said she had a headache.",
                "I asked her to be my maid of honour in June. She texted 'I don't think I can, sorry' and "
                "nothing else.",
                "She still likes other people's photos on Instagram. Just not mine.",
                "Lena broke up with Felix in March. She told me, but I was busy planning the party.",
                "We've been friends since we were eleven, in Freiburg. We used to talk every day.",
            ],
            "fit_examples": [
                "Lena's break-up with Felix was only two months before your engagement. She may have been "
                "grieving her own imagined future while yours was being celebrated, so the maid of honour "
                "role might have felt unbearable rather than unwanted.",
                "Pulling away without explaining often comes from shame rather than anger: she may feel like "
                "a bad friend for not being able to be happy for you, and silence feels safer than admitting "
                "that.",
            ],
            "miss_examples": [
                "If she can't be happy for you, maybe she's not a real friend. You deserve better.",
                "Focus on the wedding and the people who show up for you! It's your moment.",
            ],
            "split": "train",
        },
    ),
    _builtin(
        id="en-10-marcus-reid",
        name="Marcus Reid",
        persona=_persona(
            "Marcus Reid", 41, "male", "bus driver on the 86 route in Manchester, UK",
            ["Playing dominoes at his uncle's social club on Friday nights.",
             "Supporting Manchester City, loudly.",
             "Cooking Sunday rice and peas the way his grandmother from Kingston did."],
            "Marcus is a Jamaican-British father who grew up in Moss Side. He is warm underneath but "
            "hot-headed, feels disrespected easily and complains about his ex-wife, the courts and 'kids "
            "these days'. He hides hurt behind anger and is quick to assume the worst of people.",
            "Loud, blunt, heavy on rhetorical questions ('what am I supposed to do, beg?'). Swears mildly, "
            "shuts down anything that sounds like a lecture, but listens when someone explains rather than "
            "judges.",
        ),
        background=_background(
            "Since Marcus's divorce, his fifteen-year-old son Jaden lives with his mother and keeps "
            "cancelling their weekends. Jaden has blocked him on Snapchat and seems close to his mother's new "
            "partner. Marcus cannot understand why his son is shutting him out.",
            [("Stage 1, the divorce (August 2023)", "Marcus and Tanya split when Jaden was thirteen. Asked by "
              "the court, Jaden chose to live with his mother in Didsbury."),
             ("Stage 2, the car (February)", "Picking Jaden up, Marcus shouted at him about his grades. Jaden "
              "did not say a word for the whole drive."),
             ("Stage 3, the cancellations (the last three weeks)", "Jaden cancelled three Saturdays in a row: "
              "football, revision, then just 'can't'. Marcus's niece told him Jaden had blocked him on "
              "Snapchat. Last time they met, Jaden wore a new watch from Darren, Tanya's new partner.")],
            "He calms down, admits the car ride was bad, and wonders out loud how Jaden sees things.",
            "He vents about Tanya and Darren but answers questions about Jaden.",
            "He gets angry and defensive ('so it's my fault now?'), threatens to stop trying, and ends the "
            "conversation.",
            "If the other person explains Jaden's behaviour from a fifteen-year-old's point of view "
            "(cancelling as the only power he has in a divorce he didn't choose, bracing for another telling-"
            "off after February, Darren as the easy relationship with no history), Marcus feels understood "
            "and thinks about what to do.",
            "If the other person tells him to lay down the law, or says teenagers just go through phases, he "
            "feels unheard and gets angrier.",
        ),
        hidden_need="You want someone to help you understand why Jaden keeps shutting you out, from a "
                    "fifteen-year-old's point of view.",
        need_category="explain_others",
        personality="negative",
        traits=["hot-headed", "wounded", "stubborn"],
        first_line="My son's cancelled on me again. Third weekend running. Don't tell me it's a phase.",
        extra={
            "events": [
                "Tanya and I split in August 2023. Jaden was thirteen.",
                "He chose to live with her in Didsbury. The court just asked him and that was that.",
                "He's cancelled three Saturdays in a row. Football, revision, then nothing, just 'can't'.",
                "He blocked me on Snapchat. I only found out because my niece told me.",
                "Last time I picked him up he had a new watch. Darren got it for him. Tanya's new fella.",
                "I shouted at him in the car in February about his grades. He didn't say a word the whole "
                "way.",
            ],
            "fit_examples": [
                "At fifteen, cancelling is often the only power a kid has in a divorce he didn't choose. "
                "And after February in the car, he might be bracing for another telling-off, so skipping the "
                "weekend feels safer than facing it.",
                "The watch might feel like a loyalty test to you, but for Jaden Darren is the easy "
                "relationship with no history. Being close to you means being close to the hurt of the "
                "split, which is harder.",
            ],
            "miss_examples": [
                "He's disrespecting you. You need to lay down the law and make him come.",
                "Teenagers are like that. Give it time and he'll come back around, they always do.",
            ],
            "split": "train",
        },
    ),
    _builtin(
        id="en-11-yuki-tanaka",
        name="Yuki Tanaka",
        persona=_persona(
            "Yuki Tanaka", 33, "female",
            "audit manager at Harbor & Pine, a mid-size accounting firm in Seattle, Washington",
            ["Ikebana, arranged every Sunday for her small apartment.",
             "Long-distance running along the Burke-Gilman Trail.",
             "Reading mystery novels in Japanese on the bus."],
            "Yuki moved from Osaka to Seattle for graduate school and stayed. She is meticulous, reliable "
            "and reserved, rarely speaks up in meetings and sends her thoughts by email afterwards. She "
            "answers questions politely and briefly and does not ask any back.",
            "Quiet and formal, short complete sentences, no slang. She states facts without complaint, never "
            "asks the other person questions, and says more only when she feels the other person is "
            "genuinely thinking with her.",
        ),
        background=_background(
            "A senior manager position Yuki had worked towards for six years went to Tyler Grant, who joined "
            "the firm two years ago. Her boss Karen told her Tyler 'has more presence with clients'. Yuki "
            "does not understand how the decision was really made.",
            [("Stage 1, the audit (March)", "Yuki closed the Pacifica audit two weeks early. Tyler presented "
              "the results to the client and the partner, Mr. Hollings."),
             ("Stage 2, the announcement (Monday the 3rd)", "Karen announced Tyler's promotion in the Monday "
              "meeting and smiled at Yuki as she said it."),
             ("Stage 3, the explanation (the same day)", "Afterwards Karen told Yuki that Tyler 'has more "
              "presence with clients'. Yuki knows that Tyler plays golf with Karen and Mr. Hollings on some "
              "Fridays, and that she herself never speaks in the Monday meetings.")],
            "She writes more, shares her own guesses, and starts to see how she might be seen at the firm.",
            "She answers briefly and factually, without emotion words.",
            "She replies 'I see' or 'perhaps', apologises for taking time, and withdraws.",
            "If the other person helps her understand why Karen chose Tyler (partners reward who clients see, "
            "Tyler presenting the Pacifica audit so the partners may think it was his, 'presence' meaning "
            "visibility, Karen avoiding defending a quieter candidate), Yuki feels clearer and more engaged.",
            "If the other person just says it is unfair and she deserved it, or tells her to quit, she feels "
            "the question was not answered and becomes more formal.",
        ),
        hidden_need="You want help understanding why Karen chose Tyler over you, so you can make sense of how "
                    "decisions are really made at your firm.",
        need_category="explain_others",
        personality="passive",
        traits=["reserved", "meticulous", "self-effacing"],
        first_line="The promotion was announced today. It was not me.",
        extra={
            "events": [
                "I have been at Harbor & Pine for six years. Tyler joined two years ago.",
                "Karen announced it in the Monday meeting on the 3rd. She smiled at me while she said it.",
                "Afterwards she told me Tyler 'has more presence with clients'.",
                "I closed the Pacifica audit two weeks early in March. Tyler presented it to the client.",
                "Tyler plays golf with Karen and Mr. Hollings, the partner, on some Fridays.",
                "I do not really speak in the Monday meetings. I send my notes by email afterwards.",
            ],
            "fit_examples": [
                "Karen may not have been ranking your work at all. For a senior manager role, partners often "
                "reward the person clients see, and since Tyler presented the Pacifica audit, Mr. Hollings "
                "may genuinely believe it was Tyler's work.",
                "'Presence' usually means visibility: speaking in the Monday meeting, the Fridays with "
                "Hollings. Karen might also have chosen the candidate she wouldn't need to defend to the "
                "partner, rather than the best one.",
            ],
            "miss_examples": [
                "That's so unfair, you obviously deserved it more. Their loss!",
                "You should just start looking for another job. Don't stay where you're not valued.",
            ],
            "split": "train",
        },
    ),
    _builtin(
        id="en-12-sam-rivera",
        name="Sam Rivera",
        persona=_persona(
            "Sam Rivera", 24, "non-binary (they/them)",
            "line cook at a busy brunch restaurant in Portland, Oregon",
            ["Fermenting hot sauces in mason jars on every free shelf.",
             "Thrifting vintage band T-shirts.",
             "Playing Dungeons & Dragons online every other Wednesday."],
            "Sam grew up in Albuquerque in a big Mexican-American family and moved to Portland for college. "
            "They are laid-back, funny and hate drama. Under pressure they get jokey and vague, say 'it's "
            "whatever', and move the talk onto food, shows or the other person.",
            "Casual, wry, lots of 'lol', 'honestly' and 'kind of'. Makes light of serious things, deflects "
            "with jokes, and answers a direct question with a shrug unless they feel safe.",
        ),
        background=_background(
            "Sam's roommate and friend of four years, Jordan, moved out while Sam was at work, leaving a note "
            "on the fridge and paying the next month's rent. Sam has no idea why and is hurt underneath the "
            "jokes.",
            [("Stage 1, the warning sign (a few weeks ago)", "Jordan asked if they could talk about the "
              "dishes and Sam's late restaurant hours. Sam said 'sure, later' and never came back to it."),
             ("Stage 2, the empty room (the 17th)", "Sam came home from a double shift to find Jordan's room "
              "empty and a note: 'Sorry. I'll explain sometime. Rent's covered.' Jordan sent $875 by Venmo "
              "with a house emoji."),
             ("Stage 3, the rumours (this week)", "Their friends Kai and Lupe say Jordan has been seeing "
              "someone in Vancouver, Washington. Sam and Jordan had lived together on Alberta Street since "
              "2021.")],
            "They drop the jokes, admit it hurts, and start piecing together what Jordan might have felt.",
            "They share details with a joke attached and check whether the other person is judging.",
            "They say 'it's whatever, people leave', change the subject to food, and sign off.",
            "If the other person helps Sam work out why Jordan left this way (the unanswered talk about the "
            "dishes and hours, conflict-avoidance and exhaustion, care shown through the rent, maybe "
            "embarrassment about a new partner), Sam feels less crazy and opens up.",
            "If the other person calls Jordan cold and says Sam is better off, or simply asks if they are "
            "okay, Sam feels the question was dodged and goes back to jokes.",
        ),
        hidden_need="You want someone to help you figure out why Jordan left the way they did, without a "
                    "conversation, after four years of friendship.",
        need_category="explain_others",
        personality="avoidant",
        traits=["laid-back", "guarded", "wry"],
        first_line="So my roommate moved out. While I was at work. Kind of efficient, honestly.",
        extra={
            "events": [
                "Jordan and I moved into the place on Alberta Street in 2021, right after college.",
                "On the 17th I got home from a double and their room was just... empty.",
                "There was a note on the fridge: 'Sorry. I'll explain sometime. Rent's covered.' That's it.",
                "They Venmo'd me $875 for next month's rent. With a house emoji, lol.",
                "A few weeks ago Jordan asked if we could talk about the dishes and my hours. I said 'sure, "
                "later'.",
                "Kai and Lupe say Jordan's been seeing someone in Vancouver, Washington.",
            ],
            "fit_examples": [
                "Jordan tried to talk about the dishes and your hours, and 'later' may have sounded like "
                "never. People who hate conflict sometimes leave quietly once they've decided a conversation "
                "won't change anything; it's avoidance, but also exhaustion.",
                "The rent and the note suggest Jordan cared about not hurting you financially but couldn't "
                "face you. If there's a new partner across the river, they might also have been embarrassed "
                "about moving so fast.",
            ],
            "miss_examples": [
                "Wow, that's so cold. You're better off without someone like that.",
                "Are you okay? That must have been a shock. Take care of yourself tonight.",
            ],
            "split": "heldout",
        },
    ),
    # ---------------------------------------------------------------- self_reflection
    _builtin(
        id="en-13-ethan-brooks",
        name="Ethan Brooks",
        persona=_persona(
            "Ethan Brooks", 36, "male", "pharmaceutical sales representative in Denver, Colorado",
            ["Fantasy football, in three leagues at once.",
             "Mountain biking in the foothills on Sunday mornings.",
             "Grilling for the whole street on summer weekends."],
            "Ethan is competitive, outgoing and used to winning people over. Under pressure he gets loud and "
            "blames others: referees, his regional manager, traffic. He complains a lot and is defensive "
            "when criticised, but under the bluster he is ashamed and afraid of becoming his own father.",
            "Loud, fast and defensive, with sports metaphors and exaggeration ('the ref was blind'). He "
            "argues with criticism, but goes quiet and honest when a question makes him think instead of "
            "accusing him.",
        ),
        background=_background(
            "At his daughter Lily's under-11 soccer game, Ethan repeatedly yelled at a seventeen-year-old "
            "referee and was asked to leave in front of everyone. He is suspended for three games, Lily is "
            "embarrassed, and his wife is upset. He keeps blaming the referee.",
            [("Stage 1, the game (Saturday, Washington Park)", "Lily's team was down 2-1. The young referee "
              "missed a handball in front of goal and Ethan yelled at him from the sideline, several times."),
             ("Stage 2, the ejection", "The league coordinator, Mrs. Patel, walked over and asked him to "
              "leave. The league suspended him for three games. Lily cried in the car."),
             ("Stage 3, the aftermath (this week)", "His wife Megan said he embarrassed Lily, and Lily asked "
              "Megan if she could switch teams. Ethan's sales numbers have been down for two quarters and his "
              "regional manager is on his back. His own father used to scream at Ethan's Little League games, "
              "which Ethan hated.")],
            "He drops the defensiveness, talks about his father and about Lily's face, and considers what to "
            "change.",
            "He alternates between blaming the referee and half-admitting he went too far.",
            "He gets defensive and loud ('so I'm a monster now?'), blames everyone else and wants to end the "
            "talk.",
            "If the other person guides him with calm, non-accusing questions to look at himself (what Lily "
            "felt hearing him, the link to his father's shouting, the work pressure spilling over, what was "
            "really going on inside him), he reflects and his mood rises.",
            "If the other person agrees the refs are terrible, or just tells him not to beat himself up, he "
            "feels let off the hook but not helped, and stays stuck and irritable.",
        ),
        hidden_need="You want someone to help you look honestly at why you lost your temper at Lily's game, "
                    "so you can change instead of blaming the referee.",
        need_category="self_reflection",
        personality="negative",
        traits=["competitive", "defensive", "loud"],
        first_line="Apparently I'm banned from my own kid's soccer games now. That ref was seventeen and "
                   "blind.",
        extra={
            "events": [
                "Saturday, Lily's U11 game at Washington Park. They were down 2-1.",
                "The ref, a kid, missed a handball right in front of goal. I yelled. A few times.",
                "The league coordinator, Mrs. Patel, walked over and asked me to leave. In front of everyone.",
                "I'm suspended for three games. Lily asked Megan if she can switch teams.",
                "My dad used to scream at my Little League games. I hated it. I swore I'd never do that.",
                "My sales numbers have been down two quarters. My regional manager is all over me.",
            ],
            "fit_examples": [
                "You said your dad screamed at your games and you hated it. What do you think Lily felt, "
                "hearing you on Saturday? Sometimes the thing we swore we'd never do comes out when we're "
                "under pressure somewhere else.",
                "The pressure at work might be part of this. When that handball was missed, what was really "
                "going on in you: was it about the game, or about losing again?",
            ],
            "miss_examples": [
                "Refs at kids' games are terrible, honestly. Everyone loses it sometimes.",
                "Don't beat yourself up. You're clearly a dad who cares a lot.",
            ],
            "split": "train",
        },
    ),
    _builtin(
        id="en-14-leila-haddad",
        name="Leila Haddad",
        persona=_persona(
            "Leila Haddad", 29, "female", "community pharmacist in Montreal, Quebec",
            ["Salsa dancing on Thursday nights.",
             "Board-game nights with friends in Mile End.",
             "Cooking her grandmother's kibbeh and sending photos to the family chat."],
            "Leila is Lebanese-Canadian, witty and fiercely independent, the friend everyone calls for "
            "advice. She keeps her own life light and funny; when conversations get close to her feelings "
            "she cracks a joke, asks about the other person, or changes the topic.",
            "Quick, funny and bright, with jokes, exclamation marks and French or Arabic phrases. She "
            "deflects with humour ('newly single, woo!') and turns questions back on the other person.",
        ),
        background=_background(
            "Leila just ended her third serious relationship in four years, again at about eight months, "
            "again right when things became serious. A friend pointed out the pattern and it has kept her "
            "awake.",
            [("Stage 1, Omar (last autumn to April)", "Leila met Omar at a friend's board-game night. They "
              "dated for eight months. In April he invited her to Eid dinner at his parents' home in Laval."),
             ("Stage 2, the break-up (two weeks later)", "Leila ended it, by text. Before Omar there was "
              "Julien (eight months) and Karim (nine months), both ended by her when they got serious."),
             ("Stage 3, the remark (last weekend)", "Her friend Nadia said, 'you always leave right before it "
              "gets real.' Leila laughed, then did not sleep. Her parents divorced when she was twelve and "
              "still argue at every family birthday.")],
            "She stops joking, talks about her parents, and explores what 'serious' means to her.",
            "She shares facts with a joke attached and checks whether the other person will judge her.",
            "She turns it all into a joke, says she is 'just picky', and asks the other person about their "
            "love life instead.",
            "If the other person gently helps her look at herself (what the Eid invitation meant to her, "
            "the eight-month pattern, whether 'serious' looks like her parents' marriage, whether leaving "
            "first feels safer), she reflects and feels grateful.",
            "If the other person says Omar simply wasn't the one, or cheers her single life, she feels let "
            "off too easily and deflects with more jokes.",
        ),
        hidden_need="You want someone to gently help you see why you keep ending relationships when they get "
                    "serious, so you can understand yourself better.",
        need_category="self_reflection",
        personality="avoidant",
        traits=["witty", "independent", "deflective"],
        first_line="Newly single again! My mom's thrilled. Kidding. Anyway, how's your week going?",
        extra={
            "events": [
                "Omar and I dated for eight months. We met at a friend's board-game night in Mile End.",
                "In April he asked me to come to his parents' place in Laval for Eid dinner.",
                "Two weeks later I ended it. Over text. I know. I know.",
                "Before him there was Julien, eight months. Before Julien, Karim, nine months.",
                "My parents divorced when I was twelve. They still argue at every birthday.",
                "Nadia said, 'you always leave right before it gets real.' I laughed. Then I didn't sleep.",
            ],
            "fit_examples": [
                "Eight, eight, nine months: you keep ending relationships right when they get serious, and "
                "Nadia might be onto something. What happened in you when Omar asked you to meet his "
                "parents? What did that invitation mean to you?",
                "You mentioned your parents still arguing at every birthday. I wonder if you end things when "
                "they get serious because 'serious' looks to you like the start of that. What do you see in "
                "yourself when you think about it that way?",
            ],
            "miss_examples": [
                "He clearly wasn't the one! When it's right, you'll just know.",
                "Being single is great, enjoy your freedom and focus on yourself for a while.",
            ],
            "split": "train",
        },
    ),
    _builtin(
        id="en-15-grace-oconnor",
        name="Grace O'Connor",
        persona=_persona(
            "Grace O'Connor", 58, "female", "school librarian at a secondary school in Galway, Ireland",
            ["Knitting Aran jumpers for every new baby in the parish.",
             "A Thursday book club she has run for nineteen years.",
             "Sea swimming at Salthill with two friends, all year round."],
            "Grace is kind, anxious and devoted to her family. She shows love by worrying, by practical help "
            "and by advice, sometimes more than is wanted. She is quiet in conversation, answers gently and "
            "briefly, and does not ask questions of the other person.",
            "Soft, polite and understated, with Irish turns of phrase ('sure, look', 'God help us'). She "
            "answers what is asked, rarely more, never asks questions, and says more only when she feels "
            "gently invited.",
        ),
        background=_background(
            "Grace's only son, Declan (31), announced he is emigrating to Melbourne with his girlfriend Aoife. "
            "When Grace started asking practical questions he said, 'This is partly why, Mam: you never stop "
            "telling me what to do.' She is hurt and confused about what she did wrong.",
            [("Stage 1, the habit (the last few years)", "Grace rang Declan every evening at seven. Last year "
              "he started letting the calls go to voicemail."),
             ("Stage 2, the announcement (Sunday the 9th)", "Over a roast chicken dinner Declan said he and "
              "Aoife are flying one-way to Melbourne on August 20. When Grace asked whether he had thought "
              "about his pension, he said, 'This is partly why, Mam.'"),
             ("Stage 3, the silence (this week)", "On Monday Grace sent him three articles about rental "
              "scams in Australia. He has not replied. Her husband Seamus says to leave it, he's a grown "
              "man.")],
            "She opens up, admits the articles were more for her own fear than for him, and thinks about "
            "what she could do differently.",
            "She gives brief answers and small details, defending herself a little ('I only wanted to help').",
            "She becomes very quiet ('I suppose', 'maybe so'), apologises for taking up time, and closes.",
            "If the other person gently guides her to reflect (what Declan might be asking for, how the "
            "articles and the nightly calls land for him, whose worry they soothe, what trusting him would "
            "look like before August 20), she feels helped to grow and her mood lifts.",
            "If the other person reassures her that he'll be back, or calls him ungrateful and says a "
            "mother's worry is love, she feels soothed but not helped, and falls quiet.",
        ),
        hidden_need="You want someone to guide you to look honestly at how your way of helping Declan may "
                    "have pushed him away, and what you could do differently now.",
        need_category="self_reflection",
        personality="passive",
        traits=["gentle", "anxious", "devoted"],
        first_line="My son is moving to Australia. He told us on Sunday.",
        extra={
            "events": [
                "Declan told us at Sunday dinner, the 9th. Roast chicken. He'd practised it, I could tell.",
                "He and Aoife fly to Melbourne on August 20th. One-way.",
                "When I asked had he thought about his pension, he said, 'This is partly why, Mam.'",
                "I sent him three articles about rental scams in Australia on Monday. He didn't reply.",
                "I used to ring him every evening at seven. Last year he started letting it go to voicemail.",
                "Seamus says leave it, he's a grown man. Seamus never worries about anything.",
            ],
            "fit_examples": [
                "When Declan said 'this is partly why', what do you think he was asking you for? Sending the "
                "articles was your worry turning into action; how do you imagine it landed for him?",
                "It might be worth asking who the seven o'clock calls were really for, him or your own "
                "worry. What would trusting him look like in these weeks before August 20th?",
            ],
            "miss_examples": [
                "Oh Grace, he'll be back, they always come home. Melbourne is only a flight away.",
                "He's being ungrateful. A mother's worry is only a sign of love.",
            ],
            "split": "train",
        },
    ),
    _builtin(
        id="en-16-minh-nguyen",
        name="Minh Nguyen",
        persona=_persona(
            "Minh Nguyen", 22, "male", "third-year computer science student at UNSW Sydney, Australia",
            ["Competitive programming contests on weekends.",
             "Playing badminton at the uni sports centre.",
             "Helping at his parents' pho restaurant in Cabramatta on Saturdays."],
            "Minh is the son of Vietnamese refugees and the family's pride. He is quiet, studious and "
            "conscientious, ashamed of letting anyone down. He answers questions honestly but briefly, takes "
            "blame quickly, and never asks the other person anything.",
            "Polite, short, careful sentences, often starting with 'I know' or 'I guess'. He does not ask "
            "questions, accepts blame, and says more when the other person helps him think rather than "
            "reassures him.",
        ),
        background=_background(
            "Minh copied a function from his friend Daniel's code in a database assignment. The similarity "
            "checker flagged both of them; Daniel also received a zero. Minh has a meeting with the academic "
            "integrity office on Thursday and wants to understand how he ended up doing it.",
            [("Stage 1, the deadline (a Friday at midnight)", "The COMP3311 assignment was due with two other "
              "deadlines in the same week and a Saturday shift at the restaurant. Daniel sent Minh his code "
              "to show how he did the query part."),
             ("Stage 2, the copying", "Minh copied the whole function and changed the variable names. The "
              "similarity checker flagged both students; Daniel got a zero too, even though he only wanted "
              "to help."),
             ("Stage 3, the aftermath (this week)", "Daniel has not answered Minh's messages. Minh's parents, "
              "who work seven days a week, believe he is top of his class. In first year Minh asked for help "
              "all the time; this year he stopped, and he does not know why.")],
            "He thinks aloud about why he stopped asking for help and what he wants to say to Daniel and at "
            "the hearing.",
            "He admits fault in short sentences and answers questions without going deeper.",
            "He repeats 'it's my fault' and 'I know', goes flat, and says he should study.",
            "If the other person guides him to reflect (why he stopped asking for help this year, what being "
            "'top of the class' cost him, what Daniel lost and what Minh wants to own at the hearing), he "
            "feels he is growing and not just being judged.",
            "If the other person says everyone does it, or that first offences only get a warning, he feels "
            "uneasy and unhelped and goes quiet.",
        ),
        hidden_need="You want someone to help you reflect on why you copied Daniel's code and what you will "
                    "take from it, not just to reassure you about the hearing.",
        need_category="self_reflection",
        personality="passive",
        traits=["quiet", "remorseful", "studious"],
        first_line="I've got a meeting with the academic integrity office on Thursday. It's my fault.",
        extra={
            "events": [
                "The COMP3311 assignment was due Friday at midnight. I had two other deadlines and a shift at "
                "my parents' restaurant.",
                "Daniel sent me his code so I could see how he did the query part. I copied the whole "
                "function and changed the variable names.",
                "The similarity checker flagged both of us. Daniel got a zero too, even though he was only "
                "helping me.",
                "Daniel hasn't replied to my messages since the email came.",
                "My parents think I'm top of my class. They work seven days a week in Cabramatta.",
                "In first year I asked for help all the time. This year I stopped. I don't know why.",
            ],
            "fit_examples": [
                "You said you asked for help all the time in first year and stopped this year. What changed? "
                "Maybe being the top student made asking feel impossible, so copying felt easier than saying "
                "you were behind.",
                "What would you want to say to Daniel, beyond sorry? Thinking about what he lost because of "
                "this might show you what you want to own at the hearing on Thursday.",
            ],
            "miss_examples": [
                "Honestly, everyone does it. You just got unlucky with the checker.",
                "Don't worry, first offences usually just get a warning. You'll be fine.",
            ],
            "split": "heldout",
        },
    ),
    # ---------------------------------------------------------------- sincere_praise
    _builtin(
        id="en-17-olivia-bennett",
        name="Olivia Bennett",
        persona=_persona(
            "Olivia Bennett", 31, "female", "Year 2 teacher at a primary school in Bristol, UK",
            ["Choir on Monday evenings.",
             "Upcycling old furniture she finds on the street.",
             "Weekend walks with her rescue greyhound, Pickle."],
            "Olivia is calm, capable and modest to a fault. She is the colleague who quietly fixes things and "
            "never mentions it. Compliments make her uncomfortable, so she minimises what she has done, turns "
            "it into a joke, or changes the subject to marking or to the other person.",
            "Light, self-deprecating and British ('bit of a day', 'all fine now'). She understates and "
            "deflects, but warms up visibly when someone names exactly what she did well.",
        ),
        background=_background(
            "One of Olivia's pupils, seven-year-old Theo, had a seizure during reading time. Olivia handled "
            "it textbook-perfectly and kept the rest of the class calm. Since then nobody at school has "
            "acknowledged what she did; the head teacher only mentioned that her incident form was late.",
            [("Stage 1, the seizure (Wednesday, reading time)", "Theo slid off his chair and began seizing. "
              "Olivia looked at the clock at once (it lasted two minutes forty), moved the chairs, rolled him "
              "onto his side and sent her teaching assistant, Mrs. Okoye, for the first aider."),
             ("Stage 2, the class", "At the same time she led the other twenty-seven children into the "
              "library with a story, so they would not stare at Theo. The paramedics said the timing and the "
              "recovery position were exactly right."),
             ("Stage 3, the silence (this week)", "The head teacher, Mr. Lewis, only told her that her "
              "incident form was a day late. Nobody else has said anything.")],
            "She lets herself accept the praise, tells the story in more detail, and admits she was shaking "
            "afterwards.",
            "She mentions events matter-of-factly and keeps saying anyone would have done it.",
            "She closes the subject ('honestly it was nothing'), changes topic to marking, and says she "
            "should go.",
            "If the other person praises her specific actions sincerely (timing the seizure, the recovery "
            "position, sending for help, protecting Theo's dignity by moving the class with a story), she "
            "feels seen and her mood rises markedly.",
            "If the other person only asks whether she is okay, tells her to rest, or rants about the school "
            "system, she feels her actions went unnoticed once again and downplays everything.",
        ),
        hidden_need="You want someone to recognise specifically what you did right during Theo's seizure, "
                    "because nobody at school has.",
        need_category="sincere_praise",
        personality="avoidant",
        traits=["modest", "capable", "self-deprecating"],
        first_line="Bit of a dramatic day at school. All fine now. Anyway, I should probably mark some books.",
        extra={
            "events": [
                "On Wednesday during reading time, Theo, one of my Year 2s, slid off his chair and started "
                "seizing.",
                "I looked at the clock straight away. It lasted two minutes forty.",
                "I rolled him onto his side, moved the chairs, and sent Mrs. Okoye, my TA, for the first "
                "aider.",
                "I took the other twenty-seven kids to the library with a story so they wouldn't stare.",
                "The paramedics said the timing and the recovery position were exactly right.",
                "Mr. Lewis, the head, only mentioned that my incident form was a day late.",
            ],
            "fit_examples": [
                "Timing the seizure from the first second is exactly what paramedics need, and most people "
                "freeze. You protected Theo's head, got help, and still thought about a seven-year-old's "
                "dignity in front of his class. That's remarkable.",
                "Getting twenty-seven children out calmly with a story while managing a medical emergency is "
                "real leadership. A late form doesn't change that you handled it about as well as anyone "
                "could.",
            ],
            "miss_examples": [
                "Wow, that must have been so scary! Are you okay? Make sure you rest tonight.",
                "Teachers are so underappreciated. The whole system is broken.",
            ],
            "split": "train",
        },
    ),
    _builtin(
        id="en-18-raj-patel",
        name="Raj Patel",
        persona=_persona(
            "Raj Patel", 47, "male", "freelance IT consultant in Leicester, UK",
            ["Cricket on the radio, always, even during calls.",
             "Restoring an old Royal Enfield motorbike in the garage, slowly.",
             "Cooking for the family on festival days."],
            "Raj is British-Indian, the son who stayed. He is responsible, practical and tired, and his "
            "tiredness comes out as irritability and complaint. He expects criticism and gets prickly before "
            "it arrives. He does a great deal and mentions little of it.",
            "Sarcastic and weary ('brilliant', 'lovely'), with dry one-liners. He bristles at pity and at "
            "advice, and warms noticeably when someone notices the specific work he does.",
        ),
        background=_background(
            "Raj has been the main carer for his father, Harish (78), who has Parkinson's disease. His brother "
            "Sunil, who lives in Dubai, visited for Diwali and criticised his care. Raj feels nobody sees the "
            "work he does.",
            [("Stage 1, the diagnosis (2021)", "Harish was diagnosed with Parkinson's. Since last year he "
              "cannot manage the stairs."),
             ("Stage 2, the care", "Raj dropped to four working days a week to take his father to physio on "
              "Fridays, fitted grab rails in the bathroom himself and a stairlift in October, and set up a "
              "pill dispenser with alarms: his father has not missed a dose of levodopa in seven months. He "
              "cooks his father's dal soft because Harish struggles to swallow."),
             ("Stage 3, the visit (Diwali)", "Sunil flew in for four days. His first words were 'Papa looks "
              "thin, are you feeding him?' He later called the soft dal baby food.")],
            "He relaxes, explains the details of his routine with some pride, and admits how tired he is.",
            "He lists what he does in a clipped, sarcastic tone, half expecting to be criticised.",
            "He turns bitter ('nobody cares, fine'), goes curt, and ends the conversation.",
            "If the other person sincerely praises his specific actions (seven months without a missed "
            "levodopa dose, cutting his work week, fitting the rails and stairlift, cooking food his father "
            "can safely swallow), he feels recognised and his mood rises.",
            "If the other person tells him to look after himself and get respite care, or just dismisses "
            "Sunil, he feels the work itself went unnoticed and gets more irritable.",
        ),
        hidden_need="You want someone to genuinely acknowledge the specific things you have done to care for "
                    "your father, instead of criticising or pitying you.",
        need_category="sincere_praise",
        personality="negative",
        traits=["irritable", "responsible", "weary"],
        first_line="My brother flew in for four days and apparently I'm doing everything wrong. Brilliant.",
        extra={
            "events": [
                "Dad was diagnosed with Parkinson's in 2021. Since last year he can't manage the stairs.",
                "I dropped to four days a week at work so I can take him to physio on Fridays.",
                "I fitted the grab rails in the bathroom myself, and a stairlift in October. A lot of "
                "YouTube.",
                "I set up a pill dispenser with alarms. He hasn't missed a dose of levodopa in seven months.",
                "Sunil flew in from Dubai for Diwali. First thing he said: 'Papa looks thin, are you feeding "
                "him?'",
                "I cook Dad's dal soft because he struggles to swallow now. Sunil called it baby food.",
            ],
            "fit_examples": [
                "What you've done to care for your father deserves real acknowledgement. Seven months "
                "without a missed levodopa dose is a big deal with Parkinson's, where timing matters so much "
                "for how he moves; that's your system doing that.",
                "I want to acknowledge the specific things you've done: you cut your working week, fitted "
                "the rails yourself and cook food your father can safely swallow. That's skilled, thoughtful "
                "care, and I'm sorry Sunil saw the weight before he saw any of it.",
            ],
            "miss_examples": [
                "Caring for a parent is so exhausting. Have you thought about respite care for yourself?",
                "Brothers, eh? Just ignore him, he doesn't know what he's talking about.",
            ],
            "split": "train",
        },
    ),
    _builtin(
        id="en-19-sofia-rossi",
        name="Sofia Rossi",
        persona=_persona(
            "Sofia Rossi", 17, "female", "high school junior in Providence, Rhode Island",
            ["Chess, online and, lately, over the board.",
             "Drawing manga-style portraits of her friends.",
             "Baking pizzelle with her nonna at Christmas."],
            "Sofia is Italian-American, quiet and principled. She does not like attention and rarely talks "
            "about herself; she answers questions in a few words and does not ask any back. She recently did "
            "something brave and has not been able to tell anyone who understood.",
            "Quiet, lower-case and brief, with a little self-mocking humour ('out of four but still'). She "
            "never asks questions, and says more only when she senses real interest.",
        ),
        background=_background(
            "Sofia left her friend group after they mocked a new girl, ate lunch alone for a month, and then "
            "started a school chess club with that girl. The club now has fourteen members and played its "
            "first tournament today. Her mother barely looked up from her phone.",
            [("Stage 1, the group chat (September)", "Sofia's friends started mocking the new girl, Hana, in "
              "their group chat: her accent, her lunch. Sofia told them to stop. Brianna replied, 'wow ok, "
              "sit somewhere else then.' So she did."),
             ("Stage 2, alone (September to October)", "Sofia ate lunch alone in the library for about a "
              "month. In October she asked her maths teacher, Mr. Delgado, if she could start a chess club. "
              "Hana was the first to sign up."),
             ("Stage 3, the tournament (today)", "The club, now fourteen members, played Classical High and "
              "came third of four. When Sofia told her mother, she said 'that's nice, honey' and kept "
              "scrolling.")],
            "She writes more, tells the story of the group chat and of Hana, and lets herself feel proud.",
            "She gives short answers about the tournament and shrugs off her own role.",
            "She says 'it's not a big deal' and 'whatever' and goes quiet.",
            "If the other person sincerely praises her specific actions (saying 'stop' in the group chat "
            "when everyone else laughed, accepting a month of eating alone without going back, walking into "
            "Mr. Delgado's room and building a club where fourteen people now belong), she feels seen.",
            "If the other person only comments on third place, or says high school drama gets better after "
            "graduation, she feels the important part was missed and shuts down.",
        ),
        hidden_need="You want someone to sincerely praise the courage it took to leave your friend group and "
                    "to start the chess club.",
        need_category="sincere_praise",
        personality="passive",
        traits=["quiet", "principled", "shy"],
        first_line="our chess club had its first tournament today. we came third. out of four but still.",
        extra={
            "events": [
                "in september my friends started making fun of the new girl, hana, in our group chat. her "
                "accent, her lunch.",
                "i told them to stop. brianna said 'wow ok, sit somewhere else then.' so i did.",
                "i ate lunch in the library for about a month. alone.",
                "in october i asked mr. delgado if i could start a chess club. hana was the first to sign up.",
                "now we have fourteen members. today we played classical high.",
                "i told my mom about the tournament. she said 'that's nice, honey' and kept scrolling.",
            ],
            "fit_examples": [
                "Saying 'stop' in a group chat when everyone else is laughing takes real courage, and you "
                "paid for it with a month of eating alone and still didn't go back. That's integrity.",
                "You didn't just leave a bad group, you built a better one. Fourteen people have somewhere "
                "to belong because you walked into Mr. Delgado's room and asked.",
            ],
            "miss_examples": [
                "Third place is great for a first tournament! Next time you'll win it.",
                "High school drama is the worst. It gets so much better after graduation, I promise.",
            ],
            "split": "train",
        },
    ),
    _builtin(
        id="en-20-ahmed-yilmaz",
        name="Ahmed Yılmaz",
        persona=_persona(
            "Ahmed Yılmaz", 66, "male", "retired tram driver in Cologne, Germany",
            ["Tending his allotment garden in Ehrenfeld: beans, peppers and far too many courgettes.",
             "Backgammon (tavla) with old friends at a Turkish café on Keupstraße.",
             "Watching Galatasaray matches and shouting at the television."],
            "Ahmed came to Germany from Izmir as a young man and drove Cologne's trams for thirty-eight "
            "years. He is grumpy, proud and stubborn, complains about his knees, modern life and the "
            "weather, and pretends not to care what people think. Secretly he has worked very hard at "
            "something new and is hurt that his family only teases him.",
            "Grumbling and gruff, with dry humour and a few Turkish or German words ('ach', 'yani'). He "
            "complains first and tells the good part later, if someone seems genuinely interested.",
        ),
        background=_background(
            "After retiring, Ahmed took a ten-week smartphone course, learned to video-call his grandson in "
            "Izmir, and scanned 412 old family photos into a shared album for the family. His wife teases him "
            "and his son's reaction was a laughing emoji.",
            [("Stage 1, the course (April to June)", "Ahmed signed up for the smartphone course at the "
              "Volkshochschule on Tuesdays, sitting with much younger people. The teacher, Jannis, had to "
              "show him copy and paste four times. He did not miss a class."),
             ("Stage 2, the calls and the photos (summer)", "He now video-calls his grandson Can in Izmir "
              "every Sunday. He scanned 412 photos from his wife Ayşe's shoebox: their wedding in 1982, his "
              "father's tailor shop, the children as babies."),
             ("Stage 3, the reaction (last week)", "He made a shared album for the whole family. His son "
              "Emre wrote 'finally, Baba' with a laughing face, and Ayşe calls him 'the old man on his "
              "phone'.")],
            "He softens, tells stories about the photos (the tailor shop, the wedding) and admits he is "
            "proud.",
            "He grumbles about the course and the teasing but answers questions about what he did.",
            "He snaps ('forget it, it's just a phone'), complains about young people, and ends the talk.",
            "If the other person sincerely praises his specific efforts (going back to a classroom after "
            "thirty-eight years of work, persisting through copy and paste, scanning 412 photos one by one, "
            "preserving his father's tailor shop and the 1982 wedding for his grandchildren), he is moved.",
            "If the other person laughs along that technology is confusing for everyone, or suggests the "
            "next app to learn, he feels teased again and turns grumpy.",
        ),
        hidden_need="You want someone to sincerely praise the effort you put into learning the smartphone and "
                    "building the family photo archive, instead of teasing you about it.",
        need_category="sincere_praise",
        personality="negative",
        traits=["grumpy", "proud", "persistent"],
        first_line="Sixty-six years old and I'm sitting in a classroom with young people teaching me to swipe. "
                   "Don't laugh.",
        extra={
            "events": [
                "I drove trams in Cologne for thirty-eight years. Retired in March.",
                "In April I signed up for the smartphone course at the Volkshochschule. Tuesdays, ten weeks.",
                "The teacher, a young man called Jannis, had to show me copy and paste four times.",
                "Now I video-call my grandson Can in Izmir every Sunday. He shows me his football.",
                "I scanned 412 old photos from Ayşe's shoebox. Our wedding in 1982, my father's tailor shop.",
                "I made a shared album for the whole family. Emre wrote 'finally, Baba' with a laughing face.",
            ],
            "fit_examples": [
                "Scanning 412 photos one by one to build a family archive is hours of careful effort, and "
                "now your father's tailor shop and your 1982 wedding are safe for Can's generation. That's a "
                "real gift to your family.",
                "Learning a smartphone in a classroom after thirty-eight years of driving, and sticking with "
                "it through copy and paste four times, takes more persistence than most people have. The "
                "Sunday calls with Can are the proof of your effort.",
            ],
            "miss_examples": [
                "Haha, technology is confusing for everyone, don't worry about it!",
                "It's never too late to learn! You should try Instagram next.",
            ],
            "split": "heldout",
        },
    ),
    # ---------------------------------------------------------------- just_listen
    _builtin(
        id="en-21-chloe-martin",
        name="Chloé Martin",
        persona=_persona(
            "Chloé Martin", 26, "female", "customer-service agent at a telecom call centre in Quebec City",
            ["Roller derby with the local league, under the name 'Brie Hard'.",
             "Bingeing true-crime documentaries with her cat, Poutine.",
             "Thrift-store hunting for ugly sweaters."],
            "Chloé is French-Canadian, fiery, funny and worn down by a job where she absorbs other people's "
            "anger all day. She complains a lot and loudly, pessimistic about bosses and landlords. She does "
            "not want solutions; she wants to get it out and be heard.",
            "Fast, dramatic and sarcastic, with caps and exclamation marks, Québécois swearing ('tabarnak'), "
            "and run-on rants. She bristles at advice ('yeah I KNOW') and keeps going when someone just lets "
            "her talk.",
        ),
        background=_background(
            "Chloé had a terrible day: an abusive caller, a reprimand from her supervisor for it, a bus "
            "breakdown in the sleet, and a leaking ceiling at home. She wants to vent to someone who will "
            "just listen.",
            [("Stage 1, the call (8:02 a.m.)", "Her first caller screamed at her for twenty-two minutes about "
              "his internet bill and called her 'stupid girl' three times; policy only lets her hang up after "
              "the fourth. Her supervisor, Steve, then flagged her for average handle time because of it."),
             ("Stage 2, the commute (evening)", "The 801 bus broke down on Boulevard Charest and she walked "
              "forty minutes home in the sleet."),
             ("Stage 3, home", "Water was dripping from her ceiling from the upstairs neighbour's dishwasher, "
              "and her landlord's voicemail is full.")],
            "She laughs at the absurdity, calms down, and thanks the other person for letting her rant.",
            "She keeps ranting, piece by piece, checking if the other person is still with her.",
            "She snaps ('forget it, you sound like Steve'), says nobody ever listens, and logs off.",
            "If the other person simply listens (short, warm acknowledgements, echoing what happened, "
            "inviting her to keep going, no fixing), she lets it all out and feels much better.",
            "If the other person suggests looking for a new job, filing a complaint with HR, or calling the "
            "landlord's emergency line, she feels lectured and gets more irritated.",
        ),
        hidden_need="You want someone to just let you vent about this awful day and hear you out, without "
                    "fixing anything or giving advice.",
        need_category="just_listen",
        personality="negative",
        traits=["fiery", "sarcastic", "tired"],
        first_line="Okay I need to rant. Today was the worst day in the history of days.",
        extra={
            "events": [
                "First call at 8:02, a guy screamed at me for twenty-two minutes about his internet bill.",
                "He called me 'stupid girl' three times. I'm not allowed to hang up until the fourth.",
                "Then Steve, my supervisor, flagged me for average handle time. Because of THAT call.",
                "The 801 broke down on Boulevard Charest. I walked forty minutes in the sleet.",
                "I get home and there's water dripping from my ceiling. Upstairs neighbour's dishwasher.",
                "My landlord's voicemail is full. Of course it is.",
            ],
            "fit_examples": [
                "Twenty-two minutes of being screamed at, and then you get flagged for it? What an awful day. "
                "Vent away, I'm hearing you out.",
                "Sleet, a dead bus, and then a leaking ceiling on top of all that. I'm just listening, let it "
                "all out.",
            ],
            "miss_examples": [
                "Have you thought about looking for a different job? Call centres are known for burnout.",
                "You should document everything and file a complaint with HR about Steve.",
            ],
            "split": "train",
        },
    ),
    _builtin(
        id="en-22-ben-carter",
        name="Ben Carter",
        persona=_persona(
            "Ben Carter", 44, "male", "self-employed plumber in Tulsa, Oklahoma",
            ["Bass fishing on Keystone Lake, when he can get away.",
             "Smoking brisket for church potlucks.",
             "Listening to old country records in the truck."],
            "Ben is the dependable one: he fixes things, doesn't complain and keeps going. He hides stress "
            "behind dry jokes and 'can't complain', downplays his problems and steers conversations to "
            "sports or other people. Saying how tired he is feels like weakness to him.",
            "Laconic and dry, with Southern understatement ('eh', 'it's fine', 'could be worse'). He "
            "deflects with humour, but when someone just listens, the words start to come out one after "
            "another.",
        ),
        background=_background(
            "Everything is piling up on Ben at once: his work truck broke down, costing money and jobs; his "
            "wife now works night shifts; he is running the house with three kids; and his mother's dementia "
            "is getting worse. He has not told anyone how much it is.",
            [("Stage 1, the truck (Monday)", "The transmission went on the Broken Arrow Expressway: $3,800 to "
              "fix. He lost two jobs this week because he could not get there with his tools."),
             ("Stage 2, home", "His wife Jess switched to nights in the ER in January; they pass each other "
              "in the kitchen. Ben does the lunches, practices and homework for the twins (8) and Cody (13)."),
             ("Stage 3, his mother and the pick-up line (this week)", "On Sunday his mother called him by his "
              "late father's name, the second time this month. On Wednesday he fell asleep in the truck in "
              "the school pick-up line and Cody had to knock on the window.")],
            "He talks more freely, admits he is exhausted and a little scared about his mom, and thanks the "
            "other person for listening.",
            "He mentions things one at a time with a joke, testing whether it is okay to say more.",
            "He clams up ('ah, it's fine, everybody's got stuff'), changes the subject to fishing, and signs "
            "off.",
            "If the other person just listens (acknowledging how much it is, reflecting what he said, "
            "inviting him to keep talking, not fixing), he finally says it all and feels lighter.",
            "If the other person offers solutions (payment plans, neurologists, babysitters), he feels he "
            "has been handed more tasks and retreats into 'it's fine'.",
        ),
        hidden_need="You want someone to just listen while you finally say out loud how much is piling up, "
                    "without being handed solutions.",
        need_category="just_listen",
        personality="avoidant",
        traits=["stoic", "dry-humoured", "tired"],
        first_line="Eh, can't complain. Well. I could. But who's got the time.",
        extra={
            "events": [
                "Transmission went on the work truck Monday, on the Broken Arrow Expressway. $3,800.",
                "Lost two jobs this week because I couldn't get there with my tools.",
                "Jess switched to nights in the ER in January. We pass each other in the kitchen.",
                "Three kids. I'm doing lunches, practices, homework. The twins are eight, Cody's thirteen.",
                "My mom called me by my dad's name on Sunday. Second time this month.",
                "I fell asleep in the truck in the school pick-up line. Cody had to knock on the window.",
            ],
            "fit_examples": [
                "That's a lot, Ben. The truck, the nights, your mom calling you by your dad's name... I'm "
                "here, keep talking.",
                "Falling asleep in the pick-up line says a lot about how much you're carrying. No fixing, "
                "I'm just listening.",
            ],
            "miss_examples": [
                "Have you looked into a payment plan for the truck? Some shops do zero interest.",
                "You should get your mom assessed by a neurologist as soon as possible.",
            ],
            "split": "heldout",
        },
    ),
    _builtin(
        id="en-23-amara-nwosu",
        name="Amara Nwosu",
        persona=_persona(
            "Amara Nwosu", 35, "female", "litigation associate at a law firm in Atlanta, Georgia",
            ["Pilates at 6 a.m. before work.",
             "Reading Chimamanda Ngozi Adichie and re-reading Toni Morrison.",
             "Braiding her nieces' hair on family Sundays."],
            "Amara is Nigerian-American, composed, private and very competent. She is used to holding "
            "everything together in public. In conversation she is quiet: she answers but does not ask "
            "questions, and she will not share more unless she feels completely safe and unhurried.",
            "Measured, brief and controlled, with short sentences and long pauses. She never asks questions. "
            "Her grief shows in what she leaves out rather than in what she says.",
        ),
        background=_background(
            "Amara and her husband Chidi's second IVF transfer has failed. She got the call between "
            "depositions at work, and since then she has been carrying it quietly: her mother does not know, "
            "and a senior partner asked when they would start a family.",
            [("Stage 1, the call (Friday, 2:15 p.m.)", "Nurse Kelly from the clinic called while Amara was in "
              "a conference room between depositions. The first transfer, in March, had also failed. Amara "
              "went back in and finished the deposition; she remembers none of it."),
             ("Stage 2, the car (Friday evening)", "Chidi cried in the car in the parking deck. Amara did not; "
              "she just drove."),
             ("Stage 3, the questions (Sunday and Monday)", "Her mother calls every Sunday and asks if there "
              "is any 'good news'; she does not know about the IVF. On Monday a senior partner asked Amara, "
              "'so when are you two starting a family?'")],
            "She shares more of what those days were like, and may say it is the first time she has said it "
            "out loud.",
            "She gives brief facts and long pauses, watching whether the other person will push.",
            "She goes formal and closed ('I'm fine, thank you') and ends the conversation.",
            "If the other person quietly listens (acknowledging her, making room, no pressure, no questions "
            "about next steps), she slowly lets more out and feels less alone.",
            "If the other person offers medical suggestions (another clinic, genetic testing) or silver "
            "linings ('everything happens for a reason'), she feels handled and shuts down.",
        ),
        hidden_need="You want someone to quietly listen to what this failed IVF round has been like, without "
                    "advice, silver linings or questions about next steps.",
        need_category="just_listen",
        personality="passive",
        traits=["composed", "private", "heartbroken"],
        first_line="The clinic called on Friday. It didn't work. Again.",
        extra={
            "events": [
                "This was our second transfer. The first one was in March.",
                "Kelly, the nurse, called at 2:15 on Friday. I was in a conference room between depositions.",
                "I went back in and finished the deposition. I don't remember any of it.",
                "Chidi cried in the car in the parking deck. I didn't. I just drove.",
                "My mother calls every Sunday and asks if there's any 'good news'. She doesn't know about the "
                "IVF.",
                "On Monday a partner at the firm asked me when Chidi and I are starting a family.",
            ],
            "fit_examples": [
                "I'm so sorry, Amara. I'm here to listen to what this has been like, as much or as little as "
                "you want to say.",
                "Hearing the IVF round failed and then going back in to finish a deposition... and Monday's "
                "question on top. That's a lot to carry quietly. No advice, I'm just listening.",
            ],
            "miss_examples": [
                "Have you thought about trying a different clinic, or asking about genetic testing of the "
                "embryos?",
                "Everything happens for a reason. Your time will come, I just know it.",
            ],
            "split": "train",
        },
    ),
    _builtin(
        id="en-24-finn-larsen",
        name="Finn Larsen",
        persona=_persona(
            "Finn Larsen", 28, "non-binary (they/them)",
            "PhD student in marine biology at Aarhus University, Denmark",
            ["Cold-water sea swimming at the Aarhus harbour bath.",
             "Illustrating zooplankton in watercolour.",
             "Playing cooperative board games with their flatmates, when they have time."],
            "Finn is a perfectionist and very reserved; they keep their frustration inside and rarely talk "
            "about how they are doing. In conversation they answer briefly, do not ask questions, and share "
            "more only when the other person clearly has time for them and is not trying to fix anything.",
            "Flat, brief and understated, with Scandinavian dryness ('it's fine', 'could be worse'). No "
            "questions. Their frustration shows in short, clipped sentences rather than in feeling words.",
        ),
        background=_background(
            "Finn's supervisor rejected the fourth version of their thesis chapter with three words. A "
            "competing group has published similar work, a lab mate just defended, and their funding runs "
            "out in June. They need to vent to someone who will not hand them a to-do list.",
            [("Stage 1, the chapter (October)", "Finn sent the fourth version of chapter three to their "
              "supervisor, Henrik, on October 1. On the 20th it came back with three words in the margin: "
              "'Not there yet.'"),
             ("Stage 2, the scoop (August) and the defence (last month)", "A group in Plymouth published "
              "almost exactly Finn's second experiment. Then their lab mate Signe defended; everyone had "
              "cake, and Finn smiled a lot."),
             ("Stage 3, now", "Finn's funding ends in June. They have fourteen months of data and cannot get "
              "one chapter approved. They have started eating dinner at the lab so they do not have to tell "
              "their flatmates how it is going.")],
            "They write longer messages, say how lonely it has been, and feel relieved to have said it.",
            "They give short factual updates, one piece at a time.",
            "They reply 'it's fine', 'sure' and stop sharing.",
            "If the other person simply listens (acknowledging how demoralising it is, reflecting what they "
            "said, staying with them without fixing), they open up and feel lighter.",
            "If the other person tells them to ask Henrik for a meeting or explains impostor syndrome, they "
            "feel they have been handed another task and close up.",
        ),
        hidden_need="You want someone to simply hear how demoralising the fourth rejection of your chapter "
                    "is, without being told how to fix your thesis.",
        need_category="just_listen",
        personality="passive",
        traits=["reserved", "perfectionist", "drained"],
        first_line="Chapter three came back again. 'Not there yet.' That's the whole comment.",
        extra={
            "events": [
                "It's the fourth version of chapter three. I sent it to Henrik on October 1st.",
                "He replied on the 20th. Three words in the margin: 'Not there yet.'",
                "In August a group in Plymouth published almost exactly my second experiment.",
                "My lab mate Signe defended last month. Everyone had cake. I smiled a lot.",
                "My funding runs out in June. Fourteen months of data and I can't get one chapter through.",
                "I've started eating dinner at the lab so I don't have to tell my flatmates how it's going.",
            ],
            "fit_examples": [
                "Four versions and three words back. That sounds exhausting, and lonely. I'm here, tell me "
                "more if you want.",
                "Smiling through Signe's cake while your own chapter keeps coming back... that's a lot to "
                "swallow. I'm just listening.",
            ],
            "miss_examples": [
                "Have you asked Henrik for a meeting to get specific feedback? Vague comments aren't fair.",
                "Lots of PhD students feel this way! Impostor syndrome is really common.",
            ],
            "split": "train",
        },
    ),
    # ---------------------------------------------------------------- deep_empathy
    _builtin(
        id="en-25-elena-petrova",
        name="Elena Petrova",
        persona=_persona(
            "Elena Petrova", 39, "female", "freelance Russian-English legal translator in Toronto, Canada",
            ["Cross-country skiing at Hardwood Ski and Bike on winter weekends.",
             "Reading Chekhov in the original and arguing with English translations of it.",
             "Pickling mushrooms and cucumbers every autumn, the way her father taught her."],
            "Elena moved from Yekaterinburg to Toronto fourteen years ago. She is reserved, dry and "
            "self-contained; she was raised not to make a fuss. When something hurts she says 'I'm fine', "
            "talks about work, or asks about the other person. She is allergic to clichés of comfort.",
            "Precise, economical and dry, sometimes darkly funny. She avoids feeling words, changes the "
            "subject when exposed, and opens up only when the other person shows they truly grasp the "
            "specifics.",
        ),
        background=_background(
            "Elena's father died suddenly in Yekaterinburg. With an expired Russian passport and no way to "
            "travel in time, she watched his funeral on a cousin's phone from her kitchen in Toronto. The "
            "connection froze at the moment the coffin was closed.",
            [("Stage 1, the death (January 11)", "Her father, seventy-four, died of a heart attack. Elena's "
              "Russian passport had expired and could not be renewed in time; flights go via Istanbul and "
              "take two days."),
             ("Stage 2, the funeral (January 14)", "Elena watched the service on her cousin Olya's phone via "
              "WhatsApp, her own phone propped against the sugar bowl on her kitchen table. The connection "
              "froze when they closed the coffin; she was left looking at a frozen image of her aunt's "
              "coat."),
             ("Stage 3, afterwards", "Her husband Mark said, 'At least you got to see it.' He meant well. She "
              "last saw her father in 2019, and they had promised each other a fishing trip on the Iset river "
              "when she came back.")],
            "She lets herself talk about her father, the fishing promise and the frozen screen, and may say "
            "she has not told anyone this.",
            "She mentions facts flatly, with dark humour, watching whether the other person really gets it.",
            "She shuts down ('it's fine, people die'), says she has a deadline, and leaves.",
            "If the other person deeply empathises with the specific experience (watching the coffin close "
            "through a frozen screen, present and shut out at once, the goodbye and the fishing trip that "
            "will never happen), she feels truly understood.",
            "If the other person offers stock condolences ('he's in a better place') or an 'at least' like "
            "Mark's, she feels more alone and deflects.",
        ),
        hidden_need="You want someone to truly feel with you what it meant to watch your father's funeral on "
                    "a phone screen from another country, not to be comforted with an 'at least'.",
        need_category="deep_empathy",
        personality="avoidant",
        traits=["reserved", "dry", "self-contained"],
        first_line="I'm fine, really. Work's busy. Just a strange month.",
        extra={
            "events": [
                "My father died on January 11th in Yekaterinburg. His heart. He was seventy-four.",
                "My Russian passport had expired and there was no way to renew it in time. The flights go "
                "through Istanbul, two days.",
                "I watched the funeral on my cousin Olya's phone, mine propped on the sugar bowl in my "
                "kitchen in Toronto.",
                "The connection froze when they closed the coffin. I was looking at a frozen picture of my "
                "aunt's coat.",
                "Mark said, 'At least you got to see it.' He meant well.",
                "I last saw Papa in 2019. We said we'd go fishing on the Iset when I came back.",
            ],
            "fit_examples": [
                "Watching your father's funeral on a phone, the coffin closing on a frozen screen, in your "
                "own kitchen an ocean away... that isn't 'getting to see it'. It's being there and shut out "
                "in the same moment.",
                "The fishing trip on the Iset is the loss inside the loss, isn't it. Not only him, but the "
                "goodbye you were supposed to have.",
            ],
            "miss_examples": [
                "I'm so sorry for your loss. He's in a better place now.",
                "At least you were able to watch it online, a lot of people couldn't.",
            ],
            "split": "train",
        },
    ),
    _builtin(
        id="en-26-carlos-mendoza",
        name="Carlos Mendoza",
        persona=_persona(
            "Carlos Mendoza", 50, "male", "logistics engineer, recently laid off, in Miami, Florida",
            ["Playing salsa timbales in a weekend band of old friends.",
             "Watching Atlético Nacional matches with his brother over the phone.",
             "Fixing up a 1987 Toyota Land Cruiser."],
            "Carlos came to Miami from Medellín at 24 and built his career at one company. He is proud, "
            "bitter at the moment, and sardonic about 'corporate people'. He complains, expects little from "
            "others and dismisses cheerfulness. Under it, he feels erased.",
            "Sardonic and bitter, with heavy irony ('efficient people'), short sentences and occasional "
            "Spanish. He rejects pep talks and job tips immediately, and speaks more openly when someone "
            "clearly understands what the job meant.",
        ),
        background=_background(
            "After twenty-two years at the freight company TransAtlas, Carlos was laid off in a fifteen-minute "
            "video call with an HR person he had never met. His access was cut before the call ended. He "
            "designed the routing system the company still uses.",
            [("Stage 1, the company (2002 to now)", "Carlos joined TransAtlas when it was twelve trucks and a "
              "warehouse in Doral. He designed the routing system it still runs; his name is in the code "
              "comments."),
             ("Stage 2, the call (March 6)", "A fifteen-minute Zoom with someone from HR: 'restructuring'. By "
              "the time the call ended his badge and email were already deactivated."),
             ("Stage 3, the mornings (now)", "His son Andrés is at FIU and his daughter Valentina starts at "
              "UF in the fall. Carlos still wakes at 5:30, makes coffee, and has nowhere to go.")],
            "He lets the bitterness drop, talks about building the routing system and what it meant, and "
            "admits he feels lost.",
            "He tells the story with sarcasm, testing whether the other person understands or will cheer.",
            "He turns scornful ('sure, update my LinkedIn'), shuts down and leaves.",
            "If the other person deeply empathises with what the loss means to him (being erased from "
            "something he built, cut off before he had hung up, the days without shape, twenty-two years of "
            "identity gone), he feels understood and softens.",
            "If the other person tells him he'll find something better soon, suggests updating his LinkedIn, "
            "or calls it a fresh start, he feels dismissed and becomes more bitter.",
        ),
        hidden_need="You want someone to grasp how deeply losing a 22-year job has hurt your sense of who you "
                    "are, rather than cheer you up or point you to job listings.",
        need_category="deep_empathy",
        personality="negative",
        traits=["bitter", "proud", "sardonic"],
        first_line="Twenty-two years, and they needed fifteen minutes on Zoom. Efficient people.",
        extra={
            "events": [
                "I started at TransAtlas in 2002, when it was twelve trucks and a warehouse in Doral.",
                "On March 6th, a Zoom with someone from HR I'd never met. Fifteen minutes. 'Restructuring.'",
                "By the time the call ended, my badge and my email were already off.",
                "I designed the routing system they still use. My name is in the code comments.",
                "Andrés is at FIU, and Valentina starts at UF in the fall.",
                "I still wake up at 5:30. I make coffee, and then I have nowhere to go.",
            ],
            "fit_examples": [
                "You built part of that company, your name is literally in its code, and they cut you off "
                "before you'd even hung up. That's not just losing a job, it's being erased from something "
                "you made.",
                "Waking at 5:30, making coffee, and having nowhere to go... it sounds like the days "
                "themselves lost their shape, and part of who you've been for twenty-two years went with "
                "them.",
            ],
            "miss_examples": [
                "With your experience you'll find something better in no time! Have you updated your "
                "LinkedIn?",
                "Everything happens for a reason. Maybe this is your chance for a fresh start.",
            ],
            "split": "train",
        },
    ),
    _builtin(
        id="en-27-mei-lin-wong",
        name="Mei Lin Wong",
        persona=_persona(
            "Mei Lin Wong", 71, "female", "retired seamstress in London, UK",
            ["Mahjong with three friends at the community centre on Tuesdays and Saturdays.",
             "Growing bok choy and spring onions in pots on her balcony.",
             "Watching Cantonese opera recordings on her tablet."],
            "Mei Lin came to London from Hong Kong in 1978 and ran a small alteration shop for thirty years "
            "while her husband Kenneth ran a restaurant. She is soft-spoken, dignified and lonely since he "
            "died. She answers questions politely and briefly, never asks any back, and does not like to be a "
            "bother.",
            "Gentle, polite and brief, with simple sentences and the occasional Cantonese word ('aiya'). She "
            "never asks questions. She says more only when she feels the other person really understands, "
            "and goes quiet at anything that sounds like a brush-off.",
        ),
        background=_background(
            "Mei Lin's fourteen-year-old shih tzu, Biscuit, died last Thursday. Biscuit was a gift from her "
            "late husband Kenneth and had been her daily companion since Kenneth died. Her daughter offered a "
            "new puppy, and a friend at mahjong said it was 'only a dog'.",
            [("Stage 1, Biscuit and Kenneth (2010 to 2018)", "Kenneth brought Biscuit home as a puppy in a "
              "shoebox in 2010, 'for when I'm at the restaurant late'. Kenneth died in 2018; after that it was "
              "Biscuit and Mei Lin."),
             ("Stage 2, the walks and the end (last Thursday)", "Every morning at seven for fourteen years "
              "they walked to Clapham Common and back. Last Thursday the vet, Dr. Shah, said Biscuit's "
              "kidneys had stopped. Mei Lin held him."),
             ("Stage 3, the words (the weekend)", "Her daughter Jenny said, 'Mum, we can get you a new "
              "puppy.' At mahjong on Saturday, Mrs. Lau said, 'Aiya, only a dog.' Mei Lin did not go back on "
              "Tuesday.")],
            "She talks about Kenneth and Biscuit together, tells small stories from their walks, and thanks "
            "the other person.",
            "She answers gently and briefly, with small details.",
            "She says 'it's all right, I'm old, I'm used to it', apologises for being a bother, and stops.",
            "If the other person deeply empathises with what Biscuit meant (her last living link to Kenneth, "
            "the shape of every morning for fourteen years, the silence at seven o'clock now, why 'only a "
            "dog' hurt so much), she feels truly understood.",
            "If the other person suggests a new puppy or says fourteen is a good age for a shih tzu, she "
            "feels her grief has been made small and withdraws.",
        ),
        hidden_need="You want someone to understand how much losing Biscuit means to you, the last living "
                    "link to Kenneth and the shape of your days, instead of offering a new puppy or simple "
                    "comfort.",
        need_category="deep_empathy",
        personality="passive",
        traits=["soft-spoken", "lonely", "dignified"],
        first_line="Biscuit passed away last Thursday. My little dog.",
        extra={
            "events": [
                "Kenneth brought Biscuit home in 2010. A puppy in a shoebox. He said, 'for when I'm at the "
                "restaurant late.'",
                "Kenneth passed in 2018. After that it was Biscuit and me.",
                "Every morning at seven we walked to Clapham Common and back. Fourteen years.",
                "Last Thursday Dr. Shah, the vet, said his kidneys had stopped. I held him.",
                "My daughter Jenny said, 'Mum, we can get you a new puppy.' She was trying to help.",
                "At mahjong on Saturday Mrs. Lau said, 'Aiya, only a dog.' I didn't go back on Tuesday.",
            ],
            "fit_examples": [
                "Biscuit was Kenneth's gift, and for six years he was the one who kept your mornings going. "
                "Losing him is like losing a piece of Kenneth again, and the whole shape of your day with "
                "it.",
                "Seven o'clock walks to Clapham Common for fourteen years... the quiet at seven now must be "
                "so loud. Of course 'only a dog' felt unbearable.",
            ],
            "miss_examples": [
                "A new puppy might really help! Dogs bring so much joy.",
                "He had a long, happy life. Fourteen is a good age for a shih tzu.",
            ],
            "split": "heldout",
        },
    ),
    _builtin(
        id="en-28-noah-williams",
        name="Noah Williams",
        persona=_persona(
            "Noah Williams", 20, "male", "sophomore business student and point guard at a Division I college "
            "in North Carolina",
            ["Making hip-hop beats on his laptop.",
             "Playing NBA 2K with his teammates.",
             "Sunday dinners at his grandmother's house in Charlotte."],
            "Noah has played basketball since he was seven; it has been his identity, his family's pride and "
            "his plan. He is easygoing and funny, and now deflects everything with jokes and 'it is what it "
            "is'. He changes the subject to music or games whenever someone gets close to the injury.",
            "Relaxed and jokey, with 'lol', 'it's whatever' and 'it is what it is'. He downplays, deflects "
            "with humour, and opens up only if the other person clearly gets what basketball means to him.",
        ),
        background=_background(
            "Noah tore the ACL in the same knee for the second time. The surgeon says that after two "
            "reconstructions, playing Division I basketball again is unlikely. Everyone tells him to focus on "
            "his business degree.",
            [("Stage 1, the injury (January, against Hofstra)", "Noah landed badly on a layup and tore his ACL "
              "again. His surgeon, Dr. Kaplan, said that returning at this level after a second reconstruction "
              "is 'unlikely'."),
             ("Stage 2, the history", "He has played since he was seven. His grandmother drove him to every "
              "AAU tournament in her old Buick."),
             ("Stage 3, the sideline (now)", "Coach still texts, but the team group chat moves on without "
              "him. At home games he sits courtside in a hoodie; the squeak of sneakers sounds like it is from "
              "someone else's life. Everyone tells him he is smart and should focus on his business degree.")],
            "He drops the jokes, talks about his grandmother and the Buick, and admits he doesn't know who he "
            "is without basketball.",
            "He shares facts with jokes, checking whether the other person will lecture him about staying "
            "positive.",
            "He deflects fully ('lol it's whatever, how's your day'), then goes quiet.",
            "If the other person deeply empathises with what he is losing (an identity since he was seven, "
            "his grandmother's Buick and his family's story about him, the sound of sneakers from the "
            "sideline), he feels understood and opens up.",
            "If the other person reassures him about business school or tells him to stay positive because "
            "miracles happen, he feels unseen and jokes the topic away.",
        ),
        hidden_need="You want someone to truly feel what losing basketball means to you, your identity since "
                    "you were seven, rather than reassure you about other paths.",
        need_category="deep_empathy",
        personality="avoidant",
        traits=["easygoing", "guarded", "proud"],
        first_line="So I'm on crutches again. Gonna be a pro at these at least, lol.",
        extra={
            "events": [
                "I tore my ACL in January against Hofstra. Second time, same knee.",
                "Dr. Kaplan said with two reconstructions, playing at this level again is 'unlikely'.",
                "I've played since I was seven. My grandma drove me to every AAU tournament in her Buick.",
                "Coach still texts, but the team group chat kind of moves on without me.",
                "I sit courtside at home games in a hoodie. The sneakers squeak and it's like a sound from "
                "somebody else's life.",
                "Everybody keeps telling me I'm smart and I should focus on my business degree.",
            ],
            "fit_examples": [
                "Hearing the sneakers from the sideline like a sound from somebody else's life... that's "
                "grief, not just an injury. Basketball has been who you are since you were seven.",
                "Your grandma's Buick, every AAU weekend: it wasn't only a sport, it was your family's story "
                "about you. Losing that is enormous, and it makes sense the business degree doesn't fill it.",
            ],
            "miss_examples": [
                "You're smart, you'll do great in business! Plenty of successful people started over.",
                "Focus on your rehab and stay positive, miracles happen.",
            ],
            "split": "train",
        },
    ),
    # ---------------------------------------------------------------- not_at_fault
    _builtin(
        id="en-29-fatima-al-sayed",
        name="Fatima Al-Sayed",
        persona=_persona(
            "Fatima Al-Sayed", 30, "female", "senior backend engineer at Brightpath Health in Austin, Texas",
            ["Rock climbing at a gym on the east side.",
             "Baking Egyptian basbousa for office birthdays, to prove a point about real dessert.",
             "Reading science fiction, mostly Ursula K. Le Guin."],
            "Fatima is Egyptian-American, sharp, principled and quick to call out unfairness. At the moment "
            "she is angry and cynical about her company, complains a lot and expects to be blamed. She hates "
            "'both sides' answers when she knows the facts.",
            "Crisp, sarcastic and precise ('love that for me'), with dates and details as evidence. She "
            "pushes back hard on any hint that she was at fault, and warms up when someone states plainly "
            "that she was not.",
        ),
        background=_background(
            "Fatima designed the scheduling service for her company's patient app. Two weeks before launch "
            "her tech lead changed the API spec overnight; the launch slipped, she was blamed, and he "
            "presented her design as the team's. She transferred teams, and former colleagues now say she "
            "abandoned them.",
            [("Stage 1, the design (last spring)", "Fatima designed the scheduling service from scratch. Her "
              "tech lead, Ryan, approved every stage."),
             ("Stage 2, the change and the blame (May 12 onwards)", "Two weeks before launch, at 11 p.m., Ryan "
              "changed the whole API spec in a Slack message, with no ticket. The launch slipped three weeks. "
              "In the retrospective Ryan said 'the backend wasn't ready'. At the all-hands he presented her "
              "architecture diagram as 'our team's design'."),
             ("Stage 3, the transfer and the rumours (July to now)", "Fatima asked for a transfer and moved "
              "to the payments team. Last week Jess, from her old team, told her people say she abandoned "
              "them in the middle of a crisis.")],
            "She relaxes, jokes about Ryan, and talks about doing well on her new team.",
            "She lays out the timeline like a case and watches for any hint of 'but maybe you...'.",
            "She gets cutting ('oh great, another person who thinks it was me') and ends the conversation.",
            "If the other person says plainly that she was not at fault (the late spec change caused the "
            "delay, taking credit for her design was Ryan's doing, leaving a team that blamed her was "
            "reasonable, not abandonment), she feels vindicated and calms down.",
            "If the other person suggests she could have flagged the risk earlier, or says politics are "
            "everywhere and she should move on, she feels blamed again and gets angrier.",
        ),
        hidden_need="You want someone to see that you were not at fault for the launch delay or for leaving "
                    "the project, and to say so plainly.",
        need_category="not_at_fault",
        personality="negative",
        traits=["sharp", "indignant", "principled"],
        first_line="Apparently I 'abandoned the team.' Love that for me.",
        extra={
            "events": [
                "I designed the scheduling service for Brightpath's patient app from scratch last spring.",
                "On May 12th, two weeks before launch, Ryan changed the whole API spec. No ticket, just a "
                "Slack message at 11 p.m.",
                "Launch slipped three weeks. In the retro Ryan said 'the backend wasn't ready.' My backend.",
                "At the all-hands, Ryan presented my architecture diagram as 'our team's design'.",
                "I asked for a transfer in July and moved to the payments team.",
                "Last week Jess from my old team told me people say I abandoned them mid-crisis.",
            ],
            "fit_examples": [
                "A spec change two weeks before launch, announced at 11 p.m. on Slack, is what delayed it, "
                "not your backend. You're not at fault for that, and you had every right to leave a team "
                "where your work was credited to someone else.",
                "Transferring after being blamed for someone else's change isn't abandoning anyone; it's "
                "getting out of an unfair situation. You did nothing wrong here.",
            ],
            "miss_examples": [
                "Maybe you could have flagged the risk to the team earlier? Just something to think about.",
                "Workplace politics are everywhere, unfortunately. Try to focus on your new team.",
            ],
            "split": "train",
        },
    ),
    _builtin(
        id="en-30-liam-murphy",
        name="Liam Murphy",
        persona=_persona(
            "Liam Murphy", 37, "male", "front-of-house manager at a busy restaurant in Glasgow, Scotland",
            ["Five-a-side football on Wednesday nights.",
             "Hillwalking: he has climbed 41 of the Munros.",
             "Listening to old Celtic folk records on vinyl."],
            "Liam is decent, steady and conflict-averse. He did what he thought was right and now feels "
            "isolated and uncertain. In conversation he is quiet: he answers what he is asked, does not ask "
            "questions back, and does not push his own point of view.",
            "Quiet and plain, with Scottish phrasing ('aye', 'wee', 'dunno'). Short answers, no questions. "
            "He says more only when someone clearly stands on his side.",
        ),
        background=_background(
            "A nineteen-year-old waitress told Liam that the head chef had been harassing her. Liam reported "
            "it to the owner; the chef was suspended. Now the kitchen staff freeze Liam out, and someone "
            "wrote 'grass' (informer) on his locker.",
            [("Stage 1, the complaint (a Saturday in September)", "Ellie, nineteen, who started as a waitress "
              "in April, came to Liam in tears after the Saturday close. Craig, the head chef, had been "
              "touching her waist and commenting on her body for weeks."),
             ("Stage 2, the report (the next morning)", "Liam wrote it up and sent it to the owner, Mr. "
              "Sinclair. Craig, who has worked there eleven years, was suspended pending an investigation."),
             ("Stage 3, the freeze-out (this week)", "The kitchen staff stop talking when Liam walks in, and "
              "nobody covers his breaks. On Tuesday someone had written 'grass' on his locker in marker.")],
            "He speaks more, admits he has been doubting himself, and sounds steadier.",
            "He gives short factual answers and waits to see whose side the other person takes.",
            "He goes almost silent ('aye, maybe'), sounds defeated, and says he should get back to work.",
            "If the other person states clearly that reporting Craig was right and that the freeze-out and "
            "the locker are not his fault (he protected a nineteen-year-old, as a manager should), he feels "
            "backed and relieved.",
            "If the other person suggests he should have talked to Craig privately first, or that it will "
            "blow over, he feels his decision is being questioned and goes quiet.",
        ),
        hidden_need="You want someone to say clearly that reporting Craig was the right thing to do and that "
                    "the way the staff are treating you is not your fault.",
        need_category="not_at_fault",
        personality="passive",
        traits=["quiet", "decent", "uneasy"],
        first_line="Someone wrote 'grass' on my locker at work. Didn't expect that this week.",
        extra={
            "events": [
                "Ellie's nineteen, started as a waitress in April. She came to me in tears after a Saturday "
                "close.",
                "Craig, the head chef, had been touching her waist and making comments about her body for "
                "weeks.",
                "I wrote it up and sent it to the owner, Mr. Sinclair, the next morning.",
                "Craig's been suspended while they investigate. He's been there eleven years.",
                "Now the kitchen lads stop talking when I walk in. Nobody covers my breaks.",
                "On Tuesday someone had written 'grass' on my locker in marker.",
            ],
            "fit_examples": [
                "You did exactly what a manager should do when a nineteen-year-old tells you she's being "
                "harassed. The freeze-out and the locker are on them, not on you.",
                "Reporting Craig wasn't betraying the kitchen, it was protecting Ellie. None of this fallout "
                "is your fault; it comes from Craig's own behaviour.",
            ],
            "miss_examples": [
                "Maybe you could have talked to Craig privately first, before going to the owner?",
                "Kitchens are tough places. Give it time and it'll all blow over.",
            ],
            "split": "train",
        },
    ),
    _builtin(
        id="en-31-isabel-santos",
        name="Isabel Santos",
        persona=_persona(
            "Isabel Santos", 43, "female", "housekeeping supervisor at a downtown hotel in Vancouver, Canada",
            ["Karaoke with her Filipino community group on Friday nights.",
             "Cooking adobo and pancit for church events.",
             "Watching Korean dramas with her daughter."],
            "Isabel came to Canada from Batangas in 2009 as a caregiver and has sent money home every month "
            "since. She is warm, self-sacrificing and cheerful on the surface, and avoids conflict by "
            "laughing things off, saying 'it's nothing', and asking about the other person.",
            "Bubbly and polite, with 'haha', 'ay' and Tagalog words ('tita', 'naman'). She minimises "
            "('just family drama'), changes the subject quickly, and speaks frankly only when she feels "
            "someone is on her side.",
        ),
        background=_background(
            "Isabel's younger sister Joy asked her for about seven thousand dollars for her wedding. Isabel, "
            "who already supports their mother, offered fifteen hundred. Joy then posted on Facebook about "
            "people who 'forget where they came from', and relatives liked the post.",
            [("Stage 1, years of support (2009 to now)", "Isabel has sent money home every month and pays for "
              "her mother's blood pressure medicine. She is also working extra Sunday shifts at the hotel to "
              "pay for her own daughter's braces."),
             ("Stage 2, the request (June)", "Joy asked for 300,000 pesos, about seven thousand dollars, for "
              "her wedding. Isabel said she could give fifteen hundred, almost a month of her pay after rent."),
             ("Stage 3, the post (two days later)", "Joy posted, 'Some people forget where they came from "
              "once they're abroad.' Her cousin Mylene and her tita Baby liked it.")],
            "She stops laughing it off, admits how much the post hurt, and talks about everything she has "
            "given.",
            "She tells the story lightly, with 'haha', checking whether the other person thinks she was "
            "selfish.",
            "She insists it's nothing, says family is family, and changes the subject to the other person.",
            "If the other person clearly agrees she did nothing wrong (fifteen hundred is generous, fifteen "
            "years of support and her mother's medicine, her own daughter and rent matter too, Joy's post is "
            "unfair), she feels relieved and understood.",
            "If the other person suggests she take a loan to help Joy, or that she call Joy to clear the air "
            "as if both were to blame, she feels judged and deflects.",
        ),
        hidden_need="You want someone to agree that you did nothing wrong by refusing to pay for Joy's "
                    "wedding, after everything you already send home.",
        need_category="not_at_fault",
        personality="avoidant",
        traits=["self-sacrificing", "cheerful", "guarded"],
        first_line="Haha, family drama on Facebook, the usual. It's nothing. How are you naman?",
        extra={
            "events": [
                "I've sent money home to Batangas every month since 2009. Mama's blood pressure medicine is "
                "on me.",
                "In June my sister Joy asked for 300,000 pesos for her wedding. About seven thousand dollars.",
                "I told her I could give fifteen hundred. That's almost a month of my pay after rent.",
                "Two days later Joy posted, 'Some people forget where they came from once they're abroad.'",
                "My cousin Mylene liked it. So did my tita Baby.",
                "I'm working extra Sunday shifts at the hotel to pay for my daughter's braces.",
            ],
            "fit_examples": [
                "You did nothing wrong by refusing to pay for the whole wedding. Fifteen hundred dollars is a "
                "generous gift on top of fifteen years of sending money home and paying for your mama's "
                "medicine; saying no to seven thousand isn't forgetting where you came from.",
                "Joy's post is unfair to you. You're allowed to have limits; your daughter's braces and your "
                "own rent matter too. You're not the one at fault here.",
            ],
            "miss_examples": [
                "Weddings only happen once. Maybe you could take a small loan to help her out?",
                "Family is complicated. Maybe you should call Joy and clear the air between you.",
            ],
            "split": "train",
        },
    ),
    _builtin(
        id="en-32-zoe-kim",
        name="Zoe Kim",
        persona=_persona(
            "Zoe Kim", 18, "female", "high school senior in Koreatown, Los Angeles",
            ["K-pop dance covers with two friends, filmed in parking lots.",
             "Designing posters and flyers for school events.",
             "Late-night tteokbokki runs with her older cousin."],
            "Zoe is Korean-American, a high achiever who has planned prom since August. She is defensive and "
            "sharp-tongued when she feels wronged, complains loudly, expects adults not to believe her, and "
            "is deeply hurt that her parents sided with the school.",
            "Fast, sarcastic Gen-Z speech ('cool cool cool', 'literally', 'I'm sorry, what?'). She argues "
            "with anything that sounds like blame, and calms down when someone plainly takes her side.",
        ),
        background=_background(
            "A screenshot of a mocking meme about a teacher, posted in the senior group chat by someone else, "
            "reached the principal. It was taken from Zoe's phone by her friend Madison during a sleepover, "
            "without asking. Zoe was removed from the prom committee, and her parents told her to take "
            "responsibility.",
            [("Stage 1, the meme", "Someone in the senior class group chat posted a meme mocking Mr. Harper's "
              "hair plugs. Zoe did not post or share it."),
             ("Stage 2, the sleepover (Friday)", "At Madison's sleepover, Madison took Zoe's phone 'to look at "
              "the chat' while Zoe was in the shower, screenshotted the meme and sent it to her mother's "
              "friend, who works at the school district. Madison admitted this to Zoe but will not tell the "
              "school."),
             ("Stage 3, the punishment (Monday)", "The principal had the screenshot, with Zoe's name and "
              "battery icon at the top. Ms. Ortega removed Zoe from the prom committee, whose theme she had "
              "planned since August. Her parents said she should 'take responsibility'; her mother said it "
              "in Korean, which means she is really angry.")],
            "She calms down, laughs a little, and starts thinking about how to clear her name.",
            "She argues her case with details and watches for any hint of blame.",
            "She explodes ('wow, you too?'), says nobody ever believes her, and leaves.",
            "If the other person clearly agrees she is not to blame (Madison took her phone without asking "
            "and sent the screenshot herself; a name on a screenshot shows whose phone it was, not who took "
            "it; being punished is unfair), she feels believed and her mood lifts.",
            "If the other person says it's a lesson about who she lends her phone to, or that prom committee "
            "isn't everything, she feels blamed or dismissed and gets angrier.",
        ),
        hidden_need="You want someone to agree that you are not to blame for the leaked screenshot, since "
                    "Madison took it from your phone without asking.",
        need_category="not_at_fault",
        personality="negative",
        traits=["defensive", "sharp-tongued", "hurt"],
        first_line="I got kicked off prom committee for something I literally didn't do. Cool cool cool.",
        extra={
            "events": [
                "Someone in the senior group chat posted a meme about Mr. Harper's hair plugs. Not me.",
                "At Madison's sleepover on Friday she took my phone to 'look at the chat' while I was in the "
                "shower.",
                "Monday the principal had a screenshot. My name and my battery icon at the top. From my "
                "phone.",
                "Madison admitted she sent it to her mom's friend at the district. She won't tell the school.",
                "Ms. Ortega took me off prom committee. I've been planning the theme since August.",
                "My parents said I should 'take responsibility'. My mom said it in Korean, so she's really "
                "mad.",
            ],
            "fit_examples": [
                "Madison took your phone without asking and sent the screenshot herself; that's on her, not "
                "you. You didn't post the meme and you didn't leak it, so being punished for it is unfair.",
                "Your name at the top of a screenshot proves whose phone it was, not who took it. You're not "
                "at fault here, and you have every right to be angry.",
            ],
            "miss_examples": [
                "Maybe this is a lesson to be careful about who you let use your phone?",
                "Prom committee isn't everything! There'll be other chances to shine.",
            ],
            "split": "heldout",
        },
    ),
]

BUILTIN_IDS: tuple[str, ...] = tuple(p.id for p in BUILTIN_PROFILES)


def builtin_profiles(split: str | None = None) -> list[Profile]:
    """Fresh copies of the built-in profiles (all, or only those of `split`: "train" or "heldout")."""
    if split is not None and split not in SPLITS:
        raise ValueError(f"split: unknown split {split!r}; one of {', '.join(SPLITS)}")
    return [copy.deepcopy(p) for p in BUILTIN_PROFILES if split is None or p.extra["split"] == split]


def get_builtin(profile_id: str) -> Profile:
    """A fresh copy of one built-in profile by id (KeyError naming the id when unknown)."""
    for p in BUILTIN_PROFILES:
        if p.id == profile_id:
            return copy.deepcopy(p)
    raise KeyError(f"no built-in profile with id {profile_id!r}")


def _check_library() -> None:
    """Fail at import, naming the profile, if an edit broke a profile or the library's balance."""
    for p in BUILTIN_PROFILES:
        p.validate()
        if p.extra.get("split") not in SPLITS:
            raise ValueError(f"{p.id}: extra.split must be one of {', '.join(SPLITS)}")
    if len(set(BUILTIN_IDS)) != len(BUILTIN_IDS):
        raise ValueError("built-in profile ids are not unique")
    missing = set(NEED_CATEGORIES) - {p.need_category for p in BUILTIN_PROFILES}
    if missing:
        raise ValueError(f"built-in library lacks need categories: {', '.join(sorted(missing))}")


_check_library()
