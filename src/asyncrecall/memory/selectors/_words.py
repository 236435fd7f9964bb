"""The words the lexical analyser (:mod:`._tokens`) sets apart: each language's stop
words, the words that tell a text's language, the letters only one language writes,
Han function characters, and the calendar's names.

Every word is written as the analyser compares it: lower case, French and German accents
dropped (Russian ``ё`` as ``е``).
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "ACCENTS",
    "CALENDAR",
    "ENGLISH_LOOKALIKES",
    "HAN_STOP_CHARACTERS",
    "HAN_STOP_WORDS",
    "STOP_CYRILLIC",
    "STOP_WORDS",
    "TELLS",
]

# Where a Han piece is cut, as at a space: function and question words, pronouns (Chinese
# mostly; a Japanese 私 or 何 too). A word holding one of these characters is cut as well
# (现在 -> 现), in notes and queries alike, so it still matches.
HAN_STOP_WORDS: Final = """
    多少 时候 時候 可以 已经 已經 因为 因為 所以 但是 如果 还是 還是 就是 一个 一個 一下
    之前 以前
"""
HAN_STOP_CHARACTERS: Final = (
    "的了吗嗎呢吧啊呀嘛"  # particles
    "我你您他她它们們"  # pronouns
    "是很把被让讓给給在要有都也就和与與或及"  # verbs, adverbs, conjunctions
    "谁誰哪几幾么麼什怎啥这這那何私"  # question words, demonstratives
)
_STOP_EN: Final = """
    a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for
    from further had has have having he her here hers herself him himself his how i if in
    into is it its itself just me more most my myself no nor not now of off on once only or
    other our ours ourselves out over own same she should so some such than that the their
    theirs them themselves then there these they this those through to too under until up
    very was we were what when where which while who whom why will with would you your
    yours yourself yourselves
"""
# French and German stop words, accents dropped (they are compared without them).
_STOP_FR: Final = """
    au aux avec ce ces cet cette ceci cela ca dans de des du elle elles en et eux il ils je
    la le les leur leurs lui ma mais me meme mes moi mon ne nos notre nous on ou par pas
    pour qu que qui quoi sa se ses son sur ta te tes toi ton tu un une vos votre vous ai as
    avons avez ont est sont suis es etes etait etaient etre avoir fait faire fais font
    comment quand quel quelle quels quelles pourquoi combien dont ici quoi alors donc si
    comme tout tous toute toutes sans sous chez entre vers tres aussi bien deja encore plus
    moins peu ya faut doit dois peut peux puis dit dire quelqu chose ni car lequel laquelle
    lesquels celui celle ceux celles
"""
_STOP_DE: Final = """
    aber alle allem allen aller alles als also am an ander andere anderen auch auf aus bei
    bin bis bist da damit dann das dass dein deine dem den der des dessen dich die dies
    diese diesem diesen dieser dieses dir doch dort du durch ein eine einem einen einer
    eines er es etwas euch euer eure fur gegen gewesen hab habe haben hat hatte hatten hier
    hin ich ihm ihn ihnen ihr ihre ihrem ihren im in ist ja jede jedem jeden jeder jedes
    jetzt kann kein keine keinen konnen konnte man manche mein meine meinem meinen mich mir
    mit muss musste mussen nach nicht nichts noch nun nur ob oder ohne sehr sein seine
    seinem seinen sich sie sind so solche soll sollte sollen sondern sonst uber um und uns
    unser unsere unter vom von vor war waren warum was weil welche welchem welchen welcher
    welches wenn wer werde werden wie wieder will wir wird wo wollen zu zum zur zwar
    zwischen wann wieso weshalb woher wohin womit worauf wurde wurden gibt geht denn schon
    mal gerade wurde wurden ob etwa
"""
_STOP_ES: Final = """
    al algo algun alguna algunas alguno algunos ante antes aqui asi aun bajo bien cada casi
    como con contra cual cuales cualquier cuando cuanto cuanta cuantos cuantas de del desde
    donde durante el ella ellas ellos en entre era eran eres es esa esas ese eso esos esta
    estaba estamos estan estar estas este esto estos estoy fue fueron ha habia han hace
    hacia hasta hay la las le les lo los mas me mi mis mismo mucho muy nada ni no nos
    nosotros nuestra nuestras nuestro nuestros os otra otras otro otros para pero poco por
    porque pues que quien quienes se segun ser si sido siempre sin sino sobre solo son su
    sus tambien tan tanto te tenemos tener tengo tiene tienen toda todas todo todos tu tus
    un una unas uno unos usted ustedes vez ya yo
"""
_STOP_IT: Final = """
    ad agli ai al all alla alle allo anche ancora abbiamo avere avete aveva che chi ci
    cio come con cosa cui da dagli dai dal dall dalla dalle dallo degli dei del dell
    della delle dello di dove ed era erano essere fa fare fra gli gia ha hai hanno ho il in
    io la le lei li lo loro lui ma me mi mia mie miei mio molto ne negli nei nel nell nella
    nelle nello noi non nostra nostre nostri nostro ogni per perche piu poi puo quale quali
    quando quanti quanto quella quelle quelli quello questa queste questi questo se sei si
    sia siamo siete solo sono su sua sue sugli sui sul sull sulla sulle suo suoi ti tra tu
    tua tue tuo tuoi tutta tutte tutti tutto un una uno vi voi
"""
_STOP_NL: Final = """
    aan al alle alles als altijd andere ben bij daar dan dat de deze die dit doen door dus
    een eens en er ge geen geweest haar had heb hebben heeft hem het hier hij hoe hun iemand
    iets ik in is ja je jij jouw kan kon kunnen maar me meer men met mij mijn moet na naar
    niet niets nog nu of om omdat ons onze ook op over reeds te tegen toch toen tot uit uw
    van veel voor waar wanneer want waren was wat waarom we wel welk welke werd wie wij wil
    wordt worden zal ze zei zelf zich zij zijn zo zonder zou zullen
"""
_STOP_PT: Final = """
    ao aos aquela aquelas aquele aqueles aqui aquilo as ate cada com como da das de dela
    dele deles desde do dos ela elas ele eles em entre era eram essa essas esse esses esta
    estas este estes estou eu foi foram ha isso isto ja lhe lhes mais mas me mesmo meu
    meus minha minhas muito na nao nas nem no nos nossa nossas nosso nossos num numa os ou
    para pela pelas pelo pelos por porque quais qual quando que quem se sem ser seu seus
    so sua suas sao sobre tambem te tem tenho todo todos toda todas tu um uma umas uns voce
    voces vos estao estava esta
"""
_STOP_RU: Final = """
    и в во не что он на я с со как а то все она так его но да ты к у же вы за бы по
    только ее ей мне было вот от меня еще нет о из ему теперь когда даже ну вдруг ли если
    уже или ни быть был него до вас нибудь опять уж вам ведь там потом себя ничего ей может
    они тут где есть надо ней для мы тебя их чем была сам чтоб без будто чего раз тоже
    себе под будет ж тогда кто этот того потому этого какой совсем ним здесь этом один
    почти мой тем чтобы нее сейчас были куда зачем всех никогда можно при наконец два об
    другой хоть после над больше тот через эти нас про всего них какая много разве три
    эту моя впрочем хорошо свою этой перед иногда лучше чуть том нельзя такой им более
    всегда конечно всю между это какие какое каким какую сколько почему наш наши нашей
    нашего нашем нам мои свой свои своей
"""
# Polish and Turkish, accents dropped (Turkish ``ı`` has none to drop).
_STOP_PL: Final = """
    a aby ale albo ani az bardzo bez bo by byc byl byla bylo byly beda bedzie ci cie co
    czy czyli dla do gdy gdzie go i ich ile im ja jak jaka jaki jakie jakiej jakim jako
    je jego jej jest jestem jestesmy jeszcze jesli jezeli juz kiedy kogo komu kto ktora
    ktore ktorego ktorej ktory ktorych ktorym ktorzy ma mam mamy maja mi mnie moj moja
    moje moze my na nad nam nas nasz nasza nasze naszego nie niech nic niz o od on ona
    one oni ono oraz po pod przed przez przy sa sie siebie sobie swoj swoja swoje ta tak
    tam te tego tej ten to tu tylko tym u w we wiec wszystko wszystkie z za ze zeby
    czego czym trzeba
"""
_STOP_TR: Final = """
    acaba ama ancak artık bazı ben beni benim bir biri birkac biz bize bizim bu buna
    bunu bunun bunlar cok daha de da defa diye en gibi hem hep hepsi her hic icin ile
    ise kac kadar ki kim mi mı mu ne neden nerede nereye niye o ona onu onun onlar sen
    siz su sey ve veya ya yani nasıl hangi kime kimin neyi nedir
"""
STOP_WORDS: Final = {
    "en": frozenset(_STOP_EN.split()),
    "fr": frozenset(_STOP_FR.split()),
    "de": frozenset(_STOP_DE.split()),
    "es": frozenset(_STOP_ES.split()),
    "it": frozenset(_STOP_IT.split()),
    "nl": frozenset(_STOP_NL.split()),
    "pt": frozenset(_STOP_PT.split()),
    "pl": frozenset(_STOP_PL.split()),
    "tr": frozenset(_STOP_TR.split()),
}
# Stop words of the later languages that English text holds as words of its own ("come",
# "per day", "door", "AI", "CI", "ha ha", "example.com", "socket.io"): still dropped from
# those languages' texts, but not counted towards them, so that an English text stays
# English.
ENGLISH_LOOKALIKES: Final = frozenset(
    {"ad", "ai", "ben", "ci", "com", "come", "dat", "die", "door", "era", "ha", "io", "ma"}
    | {"men", "per", "solo", "son", "um", "van", "want"}
)
# Polish and Turkish stop words that English text holds, each at least three times in
# the LoCoMo conversations ("a", "to", "i", "my", "we"; "her", "ve" of "we've", "o"):
# the same rule, kept to those two languages so that the others are told as before.
_LOOKALIKES_OF: Final = {
    "pl": frozenset(
        {"a", "to", "i", "on", "my", "we", "do", "by", "one", "go", "u", "w", "o", "z"}
        | {"co", "ma", "ten", "ja"}
    ),
    "tr": frozenset({"her", "ve", "o", "ya", "biz", "de", "da", "mu"}),
}
#: The words a text's language is told by: its stop words, English lookalikes aside.
TELLS: Final = {
    code: stop
    if code in ("en", "fr", "de")
    else stop - ENGLISH_LOOKALIKES - _LOOKALIKES_OF.get(code, frozenset())
    for code, stop in STOP_WORDS.items()
}
STOP_CYRILLIC: Final = frozenset(_STOP_RU.replace("ё", "е").split())
# Letters the languages write: the language of a text without stop words is the one of
# which it holds the most (Dutch has none; Spanish ``¿`` and ``¡`` are not part of a
# word; Turkish shares ``ç``, ``ö`` and ``ü`` and alone writes ``ğ``, ``ı`` and ``ş``).
ACCENTS: Final = {
    "fr": frozenset("éèêëàâçîïôûùœÿ"),
    "de": frozenset("äöüß"),
    "es": frozenset("ñ"),
    "it": frozenset("ìò"),
    "pt": frozenset("ãõ"),
    "pl": frozenset("ąćęłńśźż"),
    "tr": frozenset("ğışçöü"),
}
# Capitalised words that name a date, not a thing: every dated memory mentions them.
_CALENDAR_TEXT: Final = """
    january february march april may june july august september october november december
    monday tuesday wednesday thursday friday saturday sunday
"""
CALENDAR: Final = frozenset(_CALENDAR_TEXT.split())
