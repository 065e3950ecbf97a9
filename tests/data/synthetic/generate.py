"""Regenerate tests/data/synthetic/harbor-watch.json and harbor-watch-chat.jsonl.

A small SillyTavern world (people, places and things of an invented harbour town, with
sticky, cooldown, delay, an inclusion group, secondary keys) and an 80-message chat that
mentions them: data written for lorescan's tests, deterministic (seeded). Run from the
repository root: ``python tests/data/synthetic/generate.py``.
"""
import json, random

rng = random.Random(7)
PEOPLE = [("Maren Vale", "harbourmaster"), ("Tobin Reeve", "smuggler"), ("Old Hesk", "ferryman"),
          ("Sister Alcy", "healer"), ("Captain Dray", "watch captain"), ("Nell Sorrow", "innkeeper"),
          ("Pike", "pickpocket"), ("Lord Ansel", "governor"), ("Wren Tallow", "chandler"),
          ("Gaspard", "cartographer")]
PLACES = [("the Brine Gate", "gate"), ("the Drowned Bell", "inn"), ("the salt market", "market"),
          ("Gullwatch Tower", "tower"), ("the tide caves", "caves"), ("the chapel of Ebb", "chapel"),
          ("the long pier", "pier"), ("the customs house", "customs")]
THINGS = [("the brass lantern", "lantern"), ("a sealed letter", "letter"), ("the harbour ledger", "ledger"),
          ("black-sail ships", "black sails"), ("the storm bell", "storm bell")]

entries = {}
uid = 0


def add(keys, content, **extra):
    global uid
    e = {"uid": uid, "key": keys, "keysecondary": [], "comment": keys[0] if keys else "constant",
         "content": content, "constant": False, "selective": True, "selectiveLogic": 0,
         "order": 100 + uid, "position": 0, "disable": False, "depth": 4, "probability": 100,
         "useProbability": True, "group": "", "sticky": 0, "cooldown": 0, "delay": 0}
    e.update(extra)
    entries[str(uid)] = e
    uid += 1


add([], "Saltreach is a walled harbour town on a cold northern sea; the tide turns twice a day.", constant=True,
    order=10)
for i, (name, role) in enumerate(PEOPLE):
    other = PEOPLE[(i + 3) % len(PEOPLE)][0]
    place = PLACES[i % len(PLACES)][0]
    extra = {}
    if i % 3 == 0:
        extra["sticky"] = 3
    if i % 4 == 1:
        extra["cooldown"] = 2
    add([name, name.split()[-1], role], f"{name} is the town's {role}, often seen near {place}. "
        f"{name.split()[0]} distrusts {other}.", **extra)
for i, (name, short) in enumerate(PLACES):
    extra = {"sticky": 2} if i % 2 == 0 else {}
    if i == 3:
        extra["group"] = "landmark"
    if i == 5:
        extra["group"] = "landmark"
    add([short, name.replace("the ", "")], f"{name[0].upper() + name[1:]}: {rng.choice(['damp', 'crowded', 'quiet', 'old'])} "
        f"and {rng.choice(['watched', 'forgotten', 'busy at dawn', 'locked at night'])}. "
        f"{PEOPLE[i][0]} knows it well.", **extra)
for i, (name, short) in enumerate(THINGS):
    add([short], f"{name[0].upper() + name[1:]} matters to {PEOPLE[(i * 2) % len(PEOPLE)][0]}.",
        cooldown=3 if i % 2 else 0, delay=2 if i == 4 else 0)
add(["tide"], "When the tide is out the caves open; when it is in, the long pier floods.", selectiveLogic=0,
    keysecondary=["caves", "pier"], selective=True)

VERBS = ["mention", "ask about", "point toward", "whisper of", "curse", "wave at", "look for"]
VERBS_3RD = [v.split(" ", 1)[0] + "s" + v[len(v.split(" ", 1)[0]):] for v in VERBS]
FILLER = ["The fog is thick tonight.", "Gulls scream over the water.", "Rain drums on the shutters.",
          "Somewhere a dog barks.", "The lamps gutter in the wind.", "Nobody answers for a while."]
lines = [{"user_name": "Rob", "character_name": "Narrator", "create_date": "2026-11-30"}]
topics = [p[0] for p in PEOPLE] + [p[0] for p in PLACES] + [t[0] for t in THINGS] + ["the tide"]
for n in range(80):
    user = n % 2 == 1
    parts = []
    for _ in range(rng.choice((0, 1, 1, 2))):
        parts.append(f"{'I' if user else 'The stranger'} {rng.choice(VERBS if user else VERBS_3RD)} {rng.choice(topics)}.")
    parts.append(rng.choice(FILLER))
    rng.shuffle(parts)
    lines.append({"name": "Rob" if user else "Narrator", "is_user": user, "mes": " ".join(parts)})

with open("tests/data/synthetic/harbor-watch.json", "w") as fh:
    json.dump({"name": "Harbor Watch", "entries": entries}, fh, indent=1)
    fh.write("\n")
with open("tests/data/synthetic/harbor-watch-chat.jsonl", "w") as fh:
    for line in lines:
        fh.write(json.dumps(line) + "\n")
