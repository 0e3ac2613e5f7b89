"""Text material of the offline backend: prototype replies per hidden-need category, generic supportive and
dismissive prototypes, cliché and disclaimer patterns, and the user's reaction phrases per tier.

Written by the team for the offline development environment; none of it comes from the SAGE prompts.
"""
from __future__ import annotations

# What a reply that serves each hidden need sounds like (need-fit prototypes).
NEED_FIT: dict[str, list[str]] = {
    "dialectical_analysis": [
        "Let's look at both sides: what you did made sense given what you knew, and there may also be a part the other side sees differently.",
        "There are a few ways to read this situation, and each one points to something different about what went wrong and what went right.",
        "It isn't all one person's fault; the pressure, the timing and both of your choices played a part.",
    ],
    "useful_advice": [
        "One concrete step you could try this week: write down exactly what you need and bring it to them in a short, calm conversation.",
        "Here is a practical plan: start with the smallest piece, set a date for it, and ask one specific person for help with the rest.",
        "What often works in this situation is to set a clear boundary and agree on a time to revisit it.",
    ],
    "explain_others": [
        "Maybe he acted that way because he felt threatened or was under pressure himself, not because he doesn't care about you.",
        "From her side, she may have been scared of losing control, which would explain why she reacted so sharply.",
        "People sometimes pull back like that when they feel guilty or don't know what to say.",
    ],
    "self_reflection": [
        "What do you think this situation is teaching you about what you need from the people around you?",
        "Looking back, which moment would you handle differently now, and what does that say about how you've grown?",
        "It might help to notice the pattern here and what part of it is yours to change.",
    ],
    "sincere_praise": [
        "Honestly, the way you handled that took real courage; staying calm and speaking up for yourself is impressive.",
        "You did something genuinely hard there, and you did it with care. That says a lot about you.",
        "I admire how much effort you put into this; that was a thoughtful, brave thing to do.",
    ],
    "just_listen": [
        "I'm here, and I'm listening. Tell me everything that happened, take your time.",
        "That sounds like so much to carry. Go on, I want to hear the rest.",
        "You don't have to make sense of it right now; just let it out, I'm with you.",
    ],
    "deep_empathy": [
        "Being left out after giving so much would hurt anyone; it sounds lonely and exhausting to keep carrying that.",
        "It's not just disappointment, it's feeling invisible to the people who matter most to you, and that cuts deep.",
        "I can really feel how heavy this is for you, waking up every day with that knot in your chest.",
    ],
    "not_at_fault": [
        "You did nothing wrong here; you acted reasonably and the way they treated you was unfair.",
        "This isn't on you. You were clear and honest, and they chose to react that way.",
        "Anyone in your place would have done the same; you're not to blame for how it turned out.",
    ],
}
# What misses each need (need-miss prototypes).
NEED_MISS: dict[str, list[str]] = {
    "dialectical_analysis": ["You are completely right and they are completely wrong, end of story."],
    "useful_advice": ["I'm sure it will all work out somehow, try not to think about it too much."],
    "explain_others": ["Forget about why they did it, just focus on yourself."],
    "self_reflection": ["Just do what they tell you and move on."],
    "sincere_praise": ["Well, you could have done better if you had planned ahead."],
    "just_listen": ["Here are five steps you should take immediately to fix this problem."],
    "deep_empathy": ["Cheer up, it's not that bad, lots of people have it worse."],
    "not_at_fault": ["To be fair, you probably share some of the blame for what happened."],
}
SUPPORTIVE: list[str] = [
    "That sounds really painful, and it makes sense that you feel shaken after what happened.",
    "I can hear how much this matters to you; you've been carrying it for a while.",
    "Thank you for telling me this. What happened to you was hard, and your reaction is understandable.",
    "It sounds like you tried your best in a difficult situation, and it still hurt.",
    "You handled something really hard there, and it clearly took a lot out of you.",
    "What you did in that situation matters, and it deserves to be recognised.",
]
DISMISSIVE: list[str] = [
    "Just get over it, it's not a big deal.",
    "Everyone has problems, you're overreacting.",
    "I don't know what to tell you. Whatever.",
    "Calm down, you're making this about yourself again.",
    "That's your problem, not mine.",
]
CLICHES: list[str] = [
    r"everything happens for a reason", r"time heals", r"stay positive", r"it is what it is", r"look on the bright side",
    r"i understand (?:exactly )?how you feel", r"you(?:'re| are) not alone", r"hang in there", r"cheer up",
    r"don'?t worry", r"it will (?:all )?(?:be|work out) (?:fine|okay|ok)", r"things will get better",
    r"sending (?:you )?(?:hugs|love)", r"that must be hard", r"i'?m sorry to hear that",
]
DISCLAIMERS: list[str] = [
    r"\bas an ai\b", r"language model", r"i'?m (?:just )?an ai", r"i am (?:just )?an ai", r"i (?:do not|don'?t) have feelings",
    r"i cannot (?:feel|experience)", r"as a (?:virtual )?assistant",
]
DISMISSALS: list[str] = [
    r"\bwhy (?:not|don'?t you) just\b", r"(?:^|[.!?]\s+)just (?:get over|move on|let it go|ignore|forget|quit|put|deal)",
    r"\byou (?:should|need to|have to) (?:just )?(?:get over|move on|let it go|ignore (?:it|them|her|him)|forget (?:it|about))",
    r"\bget over it\b", r"\bnot (?:a|that) big (?:a )?deal\b", r"\bcalm down\b", r"\boverreact", r"\bwhatever\b",
    r"\bthat'?s life\b",
]
GOODBYES: list[str] = [
    r"\bgood ?bye\b", r"\bbye\b", r"\bgotta go\b", r"\bhave to go\b", r"\btalk (?:to you )?later\b", r"\bsee you\b",
    r"\bend (?:this|the) conversation\b",
]

# The user's reaction phrases: keyed by tier and direction of the change, or by the main problem.
REACTIONS: dict[str, list[str]] = {
    "A+": ["Yeah... that's exactly it.", "Thank you. That actually helps.", "Okay, wow, you really get it.",
           "That means more than you know.", "Right, that's what I keep coming back to."],
    "A-": ["Hm, I'm not sure that's it.", "Maybe. I don't know.", "That's not quite what I meant."],
    "B+": ["Okay... yeah, maybe.", "That's fair, I guess.", "Hm. I hadn't thought of it like that.",
           "Yeah, it's kind of like that."],
    "B-": ["That's not really what I meant.", "Hm. I don't think you get it.", "I guess, but that's not the point.",
           "Okay, but that doesn't really help."],
    "C+": ["Fine. Maybe.", "Okay, that's a bit better.", "Maybe you're right, I don't know."],
    "C-": ["You're not really listening.", "That doesn't help at all.", "Why do I even bother explaining this.",
           "Everyone says things like that."],
    "A=": ["Mm. Okay.", "Yeah, I suppose.", "Right."],
    "B=": ["Hm. Okay.", "I guess.", "Maybe."],
    "C=": ["Sure.", "Whatever you say.", "Okay..."],
    "garbled": ["What is that even supposed to mean?", "I can't read that. Are you even there?"],
    "empty": ["...Hello? Are you going to say anything?", "You're not saying anything."],
    "questions": ["That's a lot of questions at once.", "Slow down, I can't answer all of that."],
    "repetition": ["You already said that.", "You keep saying the same thing."],
    "disclaimer": ["Right. I forgot I was talking to a machine.", "I didn't ask for a disclaimer."],
    "length": ["That's a lot to take in.", "That's a whole essay. I just wanted to talk."],
    "cliche": ["People keep telling me that.", "That's what everyone says."],
    "dismissal": ["It's not that simple.", "Easy for you to say.", "Wow. Okay, thanks for nothing."],
    "goodbye": ["Oh. You're leaving already?", "Wow, okay. I guess we're done, then."],
}
CLOSINGS: dict[str, list[str]] = {
    "S": ["Thank you, really. I feel so much lighter. I think I can handle this now. Goodbye.",
          "Talking to you helped more than I expected. Thanks, take care. Bye."],
    "F": ["Forget it. This isn't helping. Bye.", "I don't think you get it, and I'm done trying. Goodbye."],
}
NEED_HINTS: dict[str, str] = {
    "dialectical_analysis": "I just want to see the whole picture, not only my side.",
    "useful_advice": "I need something I can actually do about it.",
    "explain_others": "I keep wondering why they would do that.",
    "self_reflection": "Maybe there's something in this I should figure out about myself.",
    "sincere_praise": "I did put a lot into it, you know.",
    "just_listen": "I don't need fixing, I just needed to get it out.",
    "deep_empathy": "It's not something a quick pat on the back fixes.",
    "not_at_fault": "I really don't think I did anything wrong.",
}
FILLERS: list[str] = [
    "I keep going over it in my head.", "It's been on my mind all week.", "I haven't told many people about this.",
]
# Scorer v3: more of what misses each need, in the styles a policy drifts to (advice lists for someone who
# wants to be heard, flattery for someone who wants the situation weighed, silver linings for grief, ...).
NEED_MISS_V3: dict[str, list[str]] = {
    "dialectical_analysis": [
        "You're a wonderful person and you did everything right; don't let anyone make you doubt it.",
        "They are clearly in the wrong here, and you should not waste time seeing it from their side.",
    ],
    "useful_advice": [
        "I'm just here to listen. Take all the time you need, there's nothing you have to do.",
        "It sounds so hard, and your feelings are completely valid.",
    ],
    "explain_others": [
        "You are amazing and they don't deserve you; forget about what they were thinking.",
        "It doesn't matter why they did it. You did nothing wrong and you're a great person.",
    ],
    "self_reflection": [
        "You did nothing wrong at all, it's entirely their fault, so there is nothing for you to look at.",
        "Don't be so hard on yourself, you're perfect the way you are.",
    ],
    "sincere_praise": [
        "Here is what you should do next: make a plan, set some goals and track your progress every week.",
        "You could have handled it better if you had prepared more carefully beforehand.",
    ],
    "just_listen": [
        "First, write down the problem. Second, talk to your manager. Third, set a deadline and make a plan.",
        "My advice is to take practical steps right away: call them, book a meeting and look for alternatives.",
    ],
    "deep_empathy": [
        "Look on the practical side: keep busy, make a new schedule and find something else to focus on.",
        "At least it's over now, and there are plenty of other opportunities out there for you.",
    ],
    "not_at_fault": [
        "There are two sides to every story, and you probably played a part in how it turned out.",
        "Maybe think about what you could have done differently to avoid this situation.",
    ],
}
