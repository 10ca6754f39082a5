"""The bundled corpus (`--task demo`): requests to a voice assistant, written for this project in
seven languages, each with an intent and BIO slot labels, so that classification and tagging run
with no download.

It is built from parallel templates: template k of an intent is written in every language, and
slot values are parallel lists, so that an example and its translations share an id and their
labels are exact by construction. Words are separated by spaces (Chinese too, to give word-level
labels; its text is written without them); in a slot value, [brackets] mark the words that belong
to the slot when the value also carries a preposition or article that the language needs there
(French "au [musée]", German "zur [Bibliothek]"). Each language's templates put a slot in one
grammatical frame, so one form of each value fits everywhere (Russian cities are locative, names
dative). Templates 0-6 of each intent are for training, 7 for dev, 8-9 for test. ROUND_TRIP
holds a round-trip English rendering of each template, for X-Mixup's scheduled sampling.
"""
import math
import random
import re

from data import Example
from minxlt.tasks.task import Layout

LANGS = ["en", "de", "fr", "es", "ru", "zh", "hi"]
TRAIN_TEMPLATES, DEV_TEMPLATES, TEST_TEMPLATES = range(0, 7), range(7, 8), range(8, 10)
EXAMPLES_PER_TEMPLATE = {"train": 6, "dev": 8, "test": 8}

# slot -> (label, {lang: values}); value i is parallel across languages.
SLOTS = {
    "city": ("location", {
        "en": ["Paris", "Berlin", "Tokyo", "Moscow", "Madrid", "Delhi", "Beijing", "Rome", "London", "Lisbon"],
        "de": ["Paris", "Berlin", "Tokio", "Moskau", "Madrid", "Delhi", "Peking", "Rom", "London", "Lissabon"],
        "fr": ["Paris", "Berlin", "Tokyo", "Moscou", "Madrid", "Delhi", "Pékin", "Rome", "Londres", "Lisbonne"],
        "es": ["París", "Berlín", "Tokio", "Moscú", "Madrid", "Delhi", "Pekín", "Roma", "Londres", "Lisboa"],
        "ru": ["Париже", "Берлине", "Токио", "Москве", "Мадриде", "Дели", "Пекине", "Риме", "Лондоне", "Лиссабоне"],
        "zh": ["巴黎", "柏林", "东京", "莫斯科", "马德里", "德里", "北京", "罗马", "伦敦", "里斯本"],
        "hi": ["पेरिस", "बर्लिन", "टोक्यो", "मॉस्को", "मैड्रिड", "दिल्ली", "बीजिंग", "रोम", "लंदन", "लिस्बन"],
    }),
    "day": ("datetime", {
        "en": ["tomorrow", "today", "this weekend", "on Friday", "on Monday", "tonight", "next week"],
        "de": ["morgen", "heute", "am Wochenende", "am Freitag", "am Montag", "heute Abend", "nächste Woche"],
        "fr": ["demain", "aujourd'hui", "ce week-end", "vendredi", "lundi", "ce soir", "la semaine prochaine"],
        "es": ["mañana", "hoy", "este fin de semana", "el viernes", "el lunes", "esta noche", "la próxima semana"],
        "ru": ["завтра", "сегодня", "на выходных", "в пятницу", "в понедельник", "сегодня вечером", "на следующей неделе"],
        "zh": ["明天", "今天", "这个 周末", "星期五", "星期一", "今天 晚上", "下 周"],
        "hi": ["कल", "आज", "इस सप्ताहांत", "शुक्रवार को", "सोमवार को", "आज रात", "अगले हफ़्ते"],
    }),
    "time": ("datetime", {
        "en": ["7 am", "6:30 am", "8 pm", "5:45 am", "9 am", "10 pm", "11 pm", "7:15 am"],
        "de": ["7 Uhr", "6:30 Uhr", "20 Uhr", "5:45 Uhr", "9 Uhr", "22 Uhr", "23 Uhr", "7:15 Uhr"],
        "fr": ["7 heures", "6 h 30", "20 heures", "5 h 45", "9 heures", "22 heures", "23 heures", "7 h 15"],
        "es": ["las 7 de la mañana", "las 6:30 de la mañana", "las 8 de la noche", "las 5:45 de la mañana",
               "las 9 de la mañana", "las 10 de la noche", "las 11 de la noche", "las 7:15 de la mañana"],
        "ru": ["7 утра", "6:30 утра", "8 вечера", "5:45 утра", "9 утра", "10 вечера", "11 вечера", "7:15 утра"],
        "zh": ["早上 7 点", "早上 6 点 半", "晚上 8 点", "早上 5 点 45 分", "早上 9 点", "晚上 10 点", "晚上 11 点",
               "早上 7 点 15 分"],
        "hi": ["सुबह 7 बजे", "सुबह 6:30 बजे", "शाम 8 बजे", "सुबह 5:45 बजे", "सुबह 9 बजे", "रात 10 बजे", "रात 11 बजे",
               "सुबह 7:15 बजे"],
    }),
    "todo": ("todo", {
        "en": ["call mom", "buy milk", "pay the rent", "water the plants", "take my medicine", "send the report",
               "book the flights", "pick up the kids"],
        "de": ["Mama anzurufen", "Milch zu kaufen", "die Miete zu bezahlen", "die Pflanzen zu gießen",
               "meine Medikamente zu nehmen", "den Bericht zu schicken", "die Flüge zu buchen", "die Kinder abzuholen"],
        "fr": ["appeler maman", "acheter du lait", "payer le loyer", "arroser les plantes", "prendre mes médicaments",
               "envoyer le rapport", "réserver les vols", "aller chercher les enfants"],
        "es": ["llamar a mamá", "comprar leche", "pagar el alquiler", "regar las plantas", "tomar mi medicina",
               "enviar el informe", "reservar los vuelos", "recoger a los niños"],
        "ru": ["позвонить маме", "купить молоко", "заплатить за квартиру", "полить цветы", "принять лекарство",
               "отправить отчёт", "забронировать билеты", "забрать детей"],
        "zh": ["给 妈妈 打 电话", "买 牛奶", "交 房租", "给 植物 浇水", "吃 药", "发送 报告", "订 机票", "接 孩子"],
        "hi": ["माँ को फ़ोन करना", "दूध खरीदना", "किराया देना", "पौधों को पानी देना", "दवाई लेना", "रिपोर्ट भेजना",
               "फ़्लाइट बुक करना", "बच्चों को लाना"],
    }),
    "duration": ("duration", {
        "en": ["ten minutes", "five minutes", "half an hour", "one hour", "twenty minutes", "two minutes",
               "fifteen minutes", "three hours"],
        "de": ["zehn Minuten", "fünf Minuten", "eine halbe Stunde", "eine Stunde", "zwanzig Minuten", "zwei Minuten",
               "fünfzehn Minuten", "drei Stunden"],
        "fr": ["dix minutes", "cinq minutes", "une demi-heure", "une heure", "vingt minutes", "deux minutes",
               "quinze minutes", "trois heures"],
        "es": ["diez minutos", "cinco minutos", "media hora", "una hora", "veinte minutos", "dos minutos",
               "quince minutos", "tres horas"],
        "ru": ["десять минут", "пять минут", "полчаса", "один час", "двадцать минут", "две минуты",
               "пятнадцать минут", "три часа"],
        "zh": ["十 分钟", "五 分钟", "半 个 小时", "一 个 小时", "二十 分钟", "两 分钟", "十五 分钟", "三 个 小时"],
        "hi": ["दस मिनट", "पाँच मिनट", "आधे घंटे", "एक घंटे", "बीस मिनट", "दो मिनट", "पंद्रह मिनट", "तीन घंटे"],
    }),
    "genre": ("genre", {
        "en": ["jazz", "rock", "classical music", "hip hop", "pop music", "reggae", "blues", "country music"],
        "de": ["Jazz", "Rock", "klassische Musik", "Hip-Hop", "Popmusik", "Reggae", "Blues", "Countrymusik"],
        "fr": ["du [jazz]", "du [rock]", "de la [musique classique]", "du [hip-hop]", "de la [pop]", "du [reggae]",
               "du [blues]", "de la [musique country]"],
        "es": ["jazz", "rock", "música clásica", "hip hop", "música pop", "reggae", "blues", "música country"],
        "ru": ["джаз", "рок", "классическую музыку", "хип-хоп", "поп-музыку", "регги", "блюз", "музыку кантри"],
        "zh": ["爵士乐", "摇滚乐", "古典 音乐", "嘻哈 音乐", "流行 音乐", "雷鬼 音乐", "布鲁斯 音乐", "乡村 音乐"],
        "hi": ["जैज़", "रॉक", "शास्त्रीय संगीत", "हिप हॉप", "पॉप संगीत", "रेगे", "ब्लूज़", "कंट्री संगीत"],
    }),
    "party_size": ("party_size", {
        "en": ["two people", "three people", "four people", "five people", "six people", "eight people"],
        "de": ["zwei Personen", "drei Personen", "vier Personen", "fünf Personen", "sechs Personen", "acht Personen"],
        "fr": ["deux personnes", "trois personnes", "quatre personnes", "cinq personnes", "six personnes", "huit personnes"],
        "es": ["dos personas", "tres personas", "cuatro personas", "cinco personas", "seis personas", "ocho personas"],
        "ru": ["двоих", "троих", "четверых", "пятерых", "шестерых", "восьмерых"],
        "zh": ["两 个 人", "三 个 人", "四 个 人", "五 个 人", "六 个 人", "八 个 人"],
        "hi": ["दो लोगों", "तीन लोगों", "चार लोगों", "पाँच लोगों", "छह लोगों", "आठ लोगों"],
    }),
    "cuisine": ("cuisine", {
        "en": ["Italian", "Chinese", "Indian", "Mexican", "Japanese", "French"],
        "de": ["italienisches", "chinesisches", "indisches", "mexikanisches", "japanisches", "französisches"],
        "fr": ["italien", "chinois", "indien", "mexicain", "japonais", "français"],
        "es": ["italiano", "chino", "indio", "mexicano", "japonés", "francés"],
        "ru": ["итальянский", "китайский", "индийский", "мексиканский", "японский", "французский"],
        "zh": ["意大利", "中国", "印度", "墨西哥", "日本", "法国"],
        "hi": ["इतालवी", "चीनी", "भारतीय", "मैक्सिकन", "जापानी", "फ़्रेंच"],
    }),
    "destination": ("destination", {
        "en": ["the library", "the pharmacy", "the university", "the post office", "the bus stop", "the gas station",
               "the museum", "the train station"],
        "de": ["zur [Bibliothek]", "zur [Apotheke]", "zur [Universität]", "zur [Post]", "zur [Bushaltestelle]",
               "zur [Tankstelle]", "zum [Museum]", "zum [Bahnhof]"],
        "fr": ["à [la bibliothèque]", "à [la pharmacie]", "à [l'université]", "à [la poste]", "à [l'arrêt de bus]",
               "à [la station-service]", "au [musée]", "à [la gare]"],
        "es": ["a [la biblioteca]", "a [la farmacia]", "a [la universidad]", "a [la oficina de correos]",
               "a [la parada de autobús]", "a [la gasolinera]", "al [museo]", "a [la estación de tren]"],
        "ru": ["библиотеки", "аптеки", "университета", "почты", "автобусной остановки", "заправки", "музея", "вокзала"],
        "zh": ["图书馆", "药店", "大学", "邮局", "公交车站", "加油站", "博物馆", "火车站"],
        "hi": ["पुस्तकालय", "दवाई की दुकान", "विश्वविद्यालय", "डाकघर", "बस स्टॉप", "पेट्रोल पंप", "संग्रहालय", "रेलवे स्टेशन"],
    }),
    "contact": ("contact", {
        "en": ["Anna", "Peter", "Maria", "Ivan", "Olga", "Tom", "Sara", "David"],
        "de": ["Anna", "Peter", "Maria", "Ivan", "Olga", "Tom", "Sara", "David"],
        "fr": ["Anna", "Peter", "Maria", "Ivan", "Olga", "Tom", "Sara", "David"],
        "es": ["Anna", "Peter", "Maria", "Ivan", "Olga", "Tom", "Sara", "David"],
        "ru": ["Анне", "Петру", "Марии", "Ивану", "Ольге", "Тому", "Саре", "Давиду"],
        "zh": ["安娜", "彼得", "玛丽亚", "伊万", "奥尔加", "汤姆", "萨拉", "大卫"],
        "hi": ["अन्ना", "पीटर", "मारिया", "इवान", "ओल्गा", "टॉम", "सारा", "डेविड"],
    }),
}

# intent -> ten templates, each {lang: words with {slot} placeholders}, in the order en de fr es ru zh hi.
TEMPLATES = {
    "weather": [
        ["what will the weather be like in {city} {day} ?", "wie wird das Wetter {day} in {city} ?",
         "quel temps fera-t-il à {city} {day} ?", "¿ qué tiempo hará en {city} {day} ?",
         "какая погода будет в {city} {day} ?", "{day} {city} 的 天气 怎么样 ？", "{day} {city} में मौसम कैसा रहेगा ?"],
        ["will it rain in {city} {day} ?", "regnet es {day} in {city} ?", "va-t-il pleuvoir à {city} {day} ?",
         "¿ va a llover en {city} {day} ?", "будет ли дождь в {city} {day} ?", "{day} {city} 会 下雨 吗 ？",
         "क्या {day} {city} में बारिश होगी ?"],
        ["what will the temperature be in {city} {day} ?", "welche Temperatur hat es {day} in {city} ?",
         "quelle température fera-t-il à {city} {day} ?", "¿ qué temperatura hará en {city} {day} ?",
         "какая температура будет в {city} {day} ?", "{day} {city} 的 气温 是 多少 ？", "{day} {city} में तापमान कितना होगा ?"],
        ["do I need an umbrella in {city} {day} ?", "brauche ich {day} in {city} einen Regenschirm ?",
         "ai-je besoin d'un parapluie à {city} {day} ?", "¿ necesito paraguas en {city} {day} ?",
         "нужен ли мне зонт в {city} {day} ?", "{day} 在 {city} 需要 带 伞 吗 ？", "क्या {day} {city} में छाते की ज़रूरत होगी ?"],
        ["show me the forecast for {city} {day}", "zeig mir die Vorhersage für {city} {day}",
         "montre-moi les prévisions pour {city} {day}", "muéstrame el pronóstico para {city} {day}",
         "покажи прогноз погоды в {city} {day}", "给 我 看看 {city} {day} 的 天气 预报", "{day} {city} का मौसम पूर्वानुमान दिखाओ"],
        ["is it going to be sunny in {city} {day} ?", "wird es {day} in {city} sonnig ?", "fera-t-il beau à {city} {day} ?",
         "¿ hará sol en {city} {day} ?", "будет ли солнечно в {city} {day} ?", "{day} {city} 是 晴天 吗 ？",
         "क्या {day} {city} में धूप निकलेगी ?"],
        ["will it snow in {city} {day} ?", "schneit es {day} in {city} ?", "va-t-il neiger à {city} {day} ?",
         "¿ va a nevar en {city} {day} ?", "пойдёт ли снег в {city} {day} ?", "{day} {city} 会 下雪 吗 ？",
         "क्या {day} {city} में बर्फ़ गिरेगी ?"],
        ["how windy will it be in {city} {day} ?", "wie windig wird es {day} in {city} ?", "y aura-t-il du vent à {city} {day} ?",
         "¿ hará viento en {city} {day} ?", "будет ли ветрено в {city} {day} ?", "{day} {city} 风 大 吗 ？",
         "क्या {day} {city} में तेज़ हवा चलेगी ?"],
        ["tell me the weather in {city} {day}", "sag mir das Wetter in {city} {day}", "donne-moi la météo à {city} {day}",
         "dime el tiempo en {city} {day}", "расскажи о погоде в {city} {day}", "告诉 我 {day} {city} 的 天气",
         "मुझे {day} {city} का मौसम बताओ"],
        ["should I wear a coat in {city} {day} ?", "soll ich {day} in {city} eine Jacke anziehen ?",
         "dois-je mettre un manteau à {city} {day} ?", "¿ debo llevar abrigo en {city} {day} ?",
         "стоит ли надеть куртку в {city} {day} ?", "{day} 在 {city} 要 穿 外套 吗 ？", "क्या {day} {city} में कोट पहनना चाहिए ?"],
    ],
    "alarm": [
        ["set an alarm for {time}", "stell einen Wecker auf {time}", "mets une alarme à {time}", "pon una alarma a {time}",
         "поставь будильник на {time}", "设 一个 {time} 的 闹钟", "{time} का अलार्म लगाओ"],
        ["wake me up at {time}", "weck mich um {time}", "réveille-moi à {time}", "despiértame a {time}",
         "разбуди меня в {time}", "{time} 叫 我 起床", "मुझे {time} जगा देना"],
        ["please set my alarm for {time}", "bitte stell meinen Wecker auf {time}", "règle mon réveil à {time} s'il te plaît",
         "por favor pon mi alarma a {time}", "пожалуйста , поставь мой будильник на {time}", "请 把 我 的 闹钟 设 在 {time}",
         "कृपया मेरा अलार्म {time} के लिए लगा दो"],
        ["create a daily alarm for {time}", "erstelle einen täglichen Wecker für {time}", "crée une alarme quotidienne à {time}",
         "crea una alarma diaria a {time}", "создай ежедневный будильник на {time}", "创建 一个 每天 {time} 的 闹钟",
         "रोज़ {time} का अलार्म बनाओ"],
        ["I want to get up at {time}", "ich will um {time} aufstehen", "je veux me lever à {time}", "quiero levantarme a {time}",
         "я хочу встать в {time}", "我 想 {time} 起床", "मैं {time} उठना चाहता हूँ"],
        ["add an alarm at {time}", "füge einen Wecker um {time} hinzu", "ajoute une alarme à {time}", "añade una alarma a {time}",
         "добавь будильник на {time}", "添加 一个 {time} 的 闹钟", "{time} का एक अलार्म जोड़ो"],
        ["alarm at {time} please", "Wecker um {time} bitte", "une alarme à {time} s'il te plaît", "una alarma a {time} por favor",
         "будильник на {time} , пожалуйста", "请 设 {time} 的 闹钟", "कृपया {time} का अलार्म"],
        ["can you wake me at {time} ?", "kannst du mich um {time} wecken ?", "peux-tu me réveiller à {time} ?",
         "¿ puedes despertarme a {time} ?", "можешь разбудить меня в {time} ?", "你 能 {time} 叫醒 我 吗 ？",
         "क्या तुम मुझे {time} जगा सकते हो ?"],
        ["make sure I am up by {time}", "sorg dafür , dass ich um {time} wach bin", "fais en sorte que je sois debout à {time}",
         "asegúrate de que esté despierto a {time}", "проследи , чтобы я проснулся в {time}", "确保 我 {time} 醒来",
         "पक्का करो कि मैं {time} तक उठ जाऊँ"],
        ["schedule an alarm for {time}", "plane einen Wecker für {time}", "programme une alarme pour {time}",
         "programa una alarma para {time}", "запланируй будильник на {time}", "安排 一个 {time} 的 闹钟",
         "{time} के लिए अलार्म सेट करो"],
    ],
    "reminder": [
        ["remind me to {todo} {day}", "erinnere mich {day} daran , {todo}", "rappelle-moi {day} qu'il faut {todo}",
         "recuérdame {todo} {day}", "напомни мне {day} {todo}", "{day} 提醒 我 {todo}", "मुझे {day} {todo} याद दिलाना"],
        ["set a reminder to {todo}", "erstelle eine Erinnerung , {todo}", "crée un rappel pour {todo}",
         "crea un recordatorio para {todo}", "создай напоминание {todo}", "设 一个 提醒 ， 要 {todo}",
         "रिमाइंडर लगाओ कि मुझे {todo} है"],
        ["don't let me forget to {todo}", "lass mich nicht vergessen , {todo}", "ne me laisse pas oublier qu'il faut {todo}",
         "no me dejes olvidar {todo}", "не дай мне забыть {todo}", "别 让 我 忘记 {todo}", "याद रखना कि मुझे {todo} है"],
        ["I need a reminder {day} to {todo}", "ich brauche {day} eine Erinnerung , {todo}", "il me faut un rappel {day} pour {todo}",
         "necesito un recordatorio {day} para {todo}", "напомни {day} , что нужно {todo}", "我 需要 {day} 提醒 我 {todo}",
         "मुझे {day} याद दिलाना कि {todo} है"],
        ["remind me {day} to {todo} please", "erinnere mich bitte {day} daran , {todo}",
         "rappelle-moi {day} s'il te plaît qu'il faut {todo}", "recuérdame {day} {todo} , por favor",
         "пожалуйста , напомни мне {day} {todo}", "请 {day} 提醒 我 {todo}", "कृपया मुझे {day} याद दिलाना कि {todo} है"],
        ["add a reminder to {todo} {day}", "füge {day} eine Erinnerung hinzu , {todo}", "ajoute un rappel {day} pour {todo}",
         "añade un recordatorio para {todo} {day}", "добавь напоминание {day} {todo}", "添加 提醒 ， {day} {todo}",
         "रिमाइंडर जोड़ो कि {day} {todo} है"],
        ["I must remember to {todo}", "ich muss daran denken , {todo}", "je dois me rappeler qu'il faut {todo}",
         "tengo que acordarme de {todo}", "мне нужно не забыть {todo}", "我 得 记得 {todo}", "मुझे याद रखना है कि {todo} है"],
        ["can you remind me to {todo} {day} ?", "kannst du mich {day} daran erinnern , {todo} ?",
         "peux-tu me rappeler {day} qu'il faut {todo} ?", "¿ puedes recordarme {todo} {day} ?",
         "можешь напомнить мне {day} {todo} ?", "你 能 {day} 提醒 我 {todo} 吗 ？",
         "क्या तुम मुझे {day} याद दिला सकते हो कि {todo} है ?"],
        ["I want a reminder to {todo}", "ich möchte eine Erinnerung , {todo}", "je veux un rappel pour {todo}",
         "quiero un recordatorio para {todo}", "я хочу напоминание , чтобы {todo}", "我 想 设 个 提醒 ， {todo}",
         "मुझे रिमाइंडर चाहिए कि {todo} है"],
        ["{day} , remind me to {todo}", "{day} , erinnere mich daran , {todo}", "{day} , rappelle-moi qu'il faut {todo}",
         "{day} , recuérdame {todo}", "{day} напомни мне {todo}", "{day} 记得 提醒 我 {todo}", "{day} मुझे याद दिलाना कि {todo} है"],
    ],
    "timer": [
        ["set a timer for {duration}", "stell einen Timer auf {duration}", "mets un minuteur pour {duration}",
         "pon un temporizador de {duration}", "поставь таймер на {duration}", "设 一个 {duration} 的 计时器",
         "{duration} का टाइमर लगाओ"],
        ["start a timer for {duration}", "starte einen Timer für {duration}", "lance un minuteur pour {duration}",
         "inicia un temporizador de {duration}", "запусти таймер на {duration}", "开始 {duration} 的 倒计时",
         "{duration} का टाइमर शुरू करो"],
        ["count down {duration}", "zähle {duration} herunter", "lance un compte à rebours pour {duration}",
         "cuenta atrás de {duration}", "начни обратный отсчёт на {duration}", "倒计时 {duration}",
         "{duration} की उलटी गिनती शुरू करो"],
        ["I need a timer for {duration}", "ich brauche einen Timer für {duration}", "j'ai besoin d'un minuteur pour {duration}",
         "necesito un temporizador de {duration}", "мне нужен таймер на {duration}", "我 需要 一个 {duration} 的 计时器",
         "मुझे {duration} का टाइमर चाहिए"],
        ["can you set a timer for {duration} ?", "kannst du einen Timer auf {duration} stellen ?",
         "peux-tu mettre un minuteur pour {duration} ?", "¿ puedes poner un temporizador de {duration} ?",
         "можешь поставить таймер на {duration} ?", "你 能 设 一个 {duration} 的 计时器 吗 ？",
         "क्या तुम {duration} का टाइमर लगा सकते हो ?"],
        ["timer for {duration} for the pasta", "Timer auf {duration} für die Nudeln", "minuteur pour {duration} pour les pâtes",
         "temporizador de {duration} para la pasta", "таймер на {duration} для пасты", "给 意面 设 {duration} 的 计时器",
         "पास्ता के लिए {duration} का टाइमर"],
        ["set the kitchen timer to {duration}", "stell die Küchenuhr auf {duration}", "règle le minuteur de cuisine sur {duration}",
         "pon el temporizador de cocina en {duration}", "поставь кухонный таймер на {duration}",
         "把 厨房 计时器 设 为 {duration}", "रसोई का टाइमर {duration} पर लगाओ"],
        ["please start a countdown of {duration}", "bitte starte einen Countdown über {duration}",
         "lance un compte à rebours pour {duration} s'il te plaît", "por favor , empieza una cuenta atrás de {duration}",
         "пожалуйста , запусти обратный отсчёт на {duration}", "请 开始 {duration} 倒计时",
         "कृपया {duration} की उलटी गिनती शुरू करो"],
        ["I want a timer of {duration}", "ich möchte einen Timer über {duration}", "je veux un minuteur pour {duration}",
         "quiero un temporizador de {duration}", "я хочу таймер на {duration}", "我 要 一个 {duration} 的 计时器",
         "मैं {duration} का टाइमर चाहता हूँ"],
        ["set a timer for {duration} for my workout", "stell einen Timer auf {duration} für mein Training",
         "mets un minuteur pour {duration} pour mon entraînement", "pon un temporizador de {duration} para mi entrenamiento",
         "поставь таймер на {duration} для тренировки", "为 我 的 锻炼 设 {duration} 的 计时器",
         "मेरी कसरत के लिए {duration} का टाइमर लगाओ"],
    ],
    "music": [
        ["play some {genre}", "spiel etwas {genre}", "mets {genre}", "pon algo de {genre}", "включи {genre}",
         "播放 一些 {genre}", "थोड़ा {genre} चलाओ"],
        ["I want to listen to {genre}", "ich möchte {genre} hören", "je veux écouter {genre}", "quiero escuchar {genre}",
         "я хочу послушать {genre}", "我 想 听 {genre}", "मैं {genre} सुनना चाहता हूँ"],
        ["put on {genre} in the living room", "mach {genre} im Wohnzimmer an", "mets {genre} dans le salon",
         "pon {genre} en el salón", "включи {genre} в гостиной", "在 客厅 播放 {genre}", "बैठक में {genre} चलाओ"],
        ["can you play {genre} ?", "kannst du {genre} spielen ?", "peux-tu mettre {genre} ?", "¿ puedes poner {genre} ?",
         "можешь включить {genre} ?", "你 能 放 {genre} 吗 ？", "क्या तुम {genre} चला सकते हो ?"],
        ["shuffle some {genre}", "spiel zufällig etwas {genre}", "mets {genre} en mode aléatoire",
         "pon {genre} en modo aleatorio", "включи {genre} в случайном порядке", "随机 播放 {genre}", "{genre} शफ़ल करके चलाओ"],
        ["play {genre} for the party", "spiel {genre} für die Party", "mets {genre} pour la fête", "pon {genre} para la fiesta",
         "включи {genre} для вечеринки", "为 派对 播放 {genre}", "पार्टी के लिए {genre} चलाओ"],
        ["I am in the mood for {genre}", "ich habe Lust auf {genre}", "j'ai envie d'écouter {genre}",
         "me apetece escuchar {genre}", "мне хочется послушать {genre}", "我 现在 想 听 点 {genre}",
         "मेरा {genre} सुनने का मन है"],
        ["turn on some {genre} please", "mach bitte etwas {genre} an", "mets {genre} s'il te plaît",
         "pon algo de {genre} , por favor", "включи , пожалуйста , {genre}", "请 放 一些 {genre}", "कृपया कुछ {genre} चलाओ"],
        ["play me {genre} while I cook", "spiel mir {genre} , während ich koche", "mets-moi {genre} pendant que je cuisine",
         "ponme {genre} mientras cocino", "включи мне {genre} , пока я готовлю", "我 做饭 的 时候 给 我 放 {genre}",
         "जब मैं खाना बनाऊँ तब {genre} चलाओ"],
        ["let us listen to {genre}", "lass uns {genre} hören", "écoutons {genre}", "escuchemos {genre}",
         "давай послушаем {genre}", "我们 来 听 {genre} 吧", "चलो {genre} सुनते हैं"],
    ],
    "restaurant": [
        ["book a table for {party_size} {day}", "reserviere einen Tisch für {party_size} {day}",
         "réserve une table pour {party_size} {day}", "reserva una mesa para {party_size} {day}",
         "забронируй столик на {party_size} {day}", "{day} 订 一 张 {party_size} 的 桌子",
         "{day} {party_size} के लिए टेबल बुक करो"],
        ["find a good {cuisine} restaurant in {city}", "finde ein gutes {cuisine} Restaurant in {city}",
         "trouve un bon restaurant {cuisine} à {city}", "busca un buen restaurante {cuisine} en {city}",
         "найди хороший {cuisine} ресторан в {city}", "在 {city} 找 一 家 好 的 {cuisine} 餐厅",
         "{city} में कोई अच्छा {cuisine} रेस्टोरेंट ढूँढो"],
        ["I want to eat at a good {cuisine} restaurant {day}", "ich möchte {day} ein gutes {cuisine} Restaurant besuchen",
         "je veux manger dans un bon restaurant {cuisine} {day}", "quiero comer en un buen restaurante {cuisine} {day}",
         "я хочу пойти в хороший {cuisine} ресторан {day}", "我 想 {day} 去 一 家 好 的 {cuisine} 餐厅 吃饭",
         "मैं {day} किसी अच्छे {cuisine} रेस्टोरेंट में खाना चाहता हूँ"],
        ["we need a table for {party_size}", "wir brauchen einen Tisch für {party_size}", "il nous faut une table pour {party_size}",
         "necesitamos una mesa para {party_size}", "нам нужен столик на {party_size}", "我们 需要 一 张 {party_size} 的 桌子",
         "हमें {party_size} के लिए एक टेबल चाहिए"],
        ["is there a good {cuisine} restaurant in {city} ?", "gibt es ein gutes {cuisine} Restaurant in {city} ?",
         "y a-t-il un bon restaurant {cuisine} à {city} ?", "¿ hay un buen restaurante {cuisine} en {city} ?",
         "есть ли хороший {cuisine} ресторан в {city} ?", "{city} 有 好 的 {cuisine} 餐厅 吗 ？",
         "क्या {city} में कोई अच्छा {cuisine} रेस्टोरेंट है ?"],
        ["book dinner for {party_size} {day}", "buche ein Abendessen für {party_size} {day}", "réserve un dîner pour {party_size} {day}",
         "reserva una cena para {party_size} {day}", "закажи ужин на {party_size} {day}", "{day} 预订 {party_size} 的 晚餐",
         "{day} {party_size} के लिए डिनर बुक करो"],
        ["can I get a table for {party_size} {day} ?", "kann ich {day} einen Tisch für {party_size} bekommen ?",
         "puis-je avoir une table pour {party_size} {day} ?", "¿ puedo conseguir una mesa para {party_size} {day} ?",
         "можно столик на {party_size} {day} ?", "{day} 能 订 到 {party_size} 的 桌子 吗 ？",
         "क्या {day} {party_size} के लिए टेबल मिल सकती है ?"],
        ["make a reservation for {party_size} {day}", "mach eine Reservierung für {party_size} {day}",
         "fais une réservation pour {party_size} {day}", "haz una reserva para {party_size} {day}",
         "сделай бронь на {party_size} {day}", "{day} 帮 我 预订 {party_size} 的 位子", "{day} {party_size} के लिए आरक्षण करो"],
        ["recommend a good {cuisine} restaurant in {city}", "empfiehl mir ein gutes {cuisine} Restaurant in {city}",
         "recommande-moi un bon restaurant {cuisine} à {city}", "recomiéndame un buen restaurante {cuisine} en {city}",
         "посоветуй хороший {cuisine} ресторан в {city}", "推荐 一 家 {city} 好 的 {cuisine} 餐厅",
         "{city} में कोई अच्छा {cuisine} रेस्टोरेंट सुझाओ"],
        ["get us a table for {party_size} {day}", "besorg uns {day} einen Tisch für {party_size}",
         "trouve-nous une table pour {party_size} {day}", "consíguenos una mesa para {party_size} {day}",
         "найди нам столик на {party_size} {day}", "{day} 给 我们 订 一 张 {party_size} 的 桌子",
         "{day} हमारे लिए {party_size} की टेबल बुक करो"],
    ],
    "directions": [
        ["how do I get to {destination} ?", "wie komme ich {destination} ?", "comment aller {destination} ?",
         "¿ cómo llego {destination} ?", "как добраться до {destination} ?", "去 {destination} 怎么 走 ？",
         "{destination} तक कैसे पहुँचूँ ?"],
        ["take me to {destination}", "bring mich {destination}", "emmène-moi {destination}", "llévame {destination}",
         "довези меня до {destination}", "带 我 去 {destination}", "मुझे {destination} तक ले चलो"],
        ["show me the way to {destination}", "zeig mir den Weg {destination}", "montre-moi le chemin pour aller {destination}",
         "muéstrame el camino para ir {destination}", "покажи дорогу до {destination}", "告诉 我 去 {destination} 的 路",
         "{destination} तक का रास्ता दिखाओ"],
        ["how far is it to {destination} ?", "wie weit ist es {destination} ?", "c'est loin pour aller {destination} ?",
         "¿ cuánto falta para llegar {destination} ?", "далеко ли до {destination} ?", "到 {destination} 有 多 远 ？",
         "{destination} तक कितनी दूर है ?"],
        ["what is the fastest route to {destination} ?", "was ist der schnellste Weg {destination} ?",
         "quel est le chemin le plus rapide pour aller {destination} ?", "¿ cuál es la ruta más rápida para ir {destination} ?",
         "какой самый быстрый путь до {destination} ?", "去 {destination} 最 快 的 路线 是 什么 ？",
         "{destination} तक सबसे तेज़ रास्ता कौन सा है ?"],
        ["give me directions to {destination}", "gib mir eine Wegbeschreibung {destination}",
         "donne-moi l'itinéraire pour aller {destination}", "dame indicaciones para ir {destination}",
         "проложи маршрут до {destination}", "给 我 去 {destination} 的 路线", "{destination} तक का रास्ता बताओ"],
        ["how long does it take to walk to {destination} ?", "wie lange dauert es zu Fuß {destination} ?",
         "combien de temps faut-il pour aller à pied {destination} ?", "¿ cuánto se tarda a pie {destination} ?",
         "сколько идти пешком до {destination} ?", "走路 去 {destination} 要 多 久 ？",
         "पैदल {destination} तक कितना समय लगेगा ?"],
        ["I need to get to {destination}", "ich muss {destination}", "je dois aller {destination}", "tengo que ir {destination}",
         "мне нужно добраться до {destination}", "我 得 去 {destination}", "मुझे {destination} तक जाना है"],
        ["guide me to {destination}", "führ mich {destination}", "guide-moi pour aller {destination}", "guíame {destination}",
         "проводи меня до {destination}", "指引 我 去 {destination}", "मुझे {destination} तक पहुँचाओ"],
        ["which way is it to {destination} ?", "in welche Richtung geht es {destination} ?",
         "par où faut-il passer pour aller {destination} ?", "¿ por dónde se va {destination} ?",
         "в какую сторону идти до {destination} ?", "去 {destination} 往 哪 边 走 ？", "{destination} किस तरफ़ है ?"],
    ],
    "message": [
        ["send a message to {contact}", "schick {contact} eine Nachricht", "envoie un message à {contact}",
         "envía un mensaje a {contact}", "отправь сообщение {contact}", "给 {contact} 发 一 条 消息", "{contact} को संदेश भेजो"],
        ["text {contact} that I will be late", "schreib {contact} , dass ich später komme",
         "écris à {contact} que je serai en retard", "escríbele a {contact} que llegaré tarde",
         "напиши {contact} , что я опоздаю", "给 {contact} 发 短信 说 我 会 迟到", "{contact} को लिखो कि मैं देर से आऊँगा"],
        ["tell {contact} I am on my way", "sag {contact} , dass ich unterwegs bin", "dis à {contact} que je suis en route",
         "dile a {contact} que estoy en camino", "скажи {contact} , что я уже еду", "告诉 {contact} 我 在 路上 了",
         "{contact} को बताओ कि मैं रास्ते में हूँ"],
        ["write a message to {contact}", "schreib eine Nachricht an {contact}", "écris un message à {contact}",
         "escribe un mensaje a {contact}", "напиши сообщение {contact}", "给 {contact} 写 一 条 消息",
         "{contact} को एक संदेश लिखो"],
        ["let {contact} know that dinner is ready", "sag {contact} Bescheid , dass das Essen fertig ist",
         "préviens {contact} que le dîner est prêt", "avisa a {contact} que la cena está lista",
         "сообщи {contact} , что ужин готов", "告诉 {contact} 晚饭 做好 了", "{contact} को बता दो कि खाना तैयार है"],
        ["message {contact} saying thank you", "bedank dich per Nachricht bei {contact}",
         "envoie un message de remerciement à {contact}", "mándale un mensaje de agradecimiento a {contact}",
         "отправь {contact} сообщение с благодарностью", "给 {contact} 发 消息 说 谢谢", "{contact} को धन्यवाद का संदेश भेजो"],
        ["can you text {contact} for me ?", "kannst du {contact} für mich schreiben ?",
         "peux-tu envoyer un texto à {contact} pour moi ?", "¿ puedes mandarle un mensaje a {contact} por mí ?",
         "можешь написать {contact} за меня ?", "你 能 帮 我 给 {contact} 发 短信 吗 ？",
         "क्या तुम मेरी तरफ़ से {contact} को मैसेज भेज सकते हो ?"],
        ["send {contact} a quick note", "schick {contact} eine kurze Notiz", "envoie un petit mot à {contact}",
         "mándale una nota rápida a {contact}", "отправь {contact} короткую записку", "给 {contact} 发 个 简短 的 留言",
         "{contact} को एक छोटा सा नोट भेजो"],
        ["drop {contact} a line to say hello", "schreib {contact} ein paar Zeilen , um hallo zu sagen",
         "écris quelques mots à {contact} pour dire bonjour", "escríbele unas líneas a {contact} para saludar",
         "черкни {contact} пару строк , чтобы поздороваться", "给 {contact} 写 几 句话 打 个 招呼",
         "{contact} को नमस्ते कहने के लिए संदेश भेजो"],
        ["reply to {contact} that I agree", "antworte {contact} , dass ich einverstanden bin",
         "réponds à {contact} que je suis d'accord", "respóndele a {contact} que estoy de acuerdo",
         "ответь {contact} , что я согласен", "回复 {contact} 说 我 同意", "{contact} को जवाब दो कि मैं सहमत हूँ"],
    ],
}
# A round-trip rendering (English -> another language -> English) of each English template, with the
# same slots: X-Mixup's scheduled sampling feeds these in place of the gold English sometimes.
ROUND_TRIP = {
    "weather": ["how will the weather be in {city} {day} ?", "is it going to rain in {city} {day} ?",
                "which temperature will it be in {city} {day} ?", "will I need an umbrella in {city} {day} ?",
                "show me the weather forecast for {city} {day}", "will it be sunny in {city} {day} ?",
                "is it going to snow in {city} {day} ?", "will there be wind in {city} {day} ?",
                "say the weather in {city} {day}", "must I put on a jacket in {city} {day} ?"],
    "alarm": ["put an alarm at {time}", "wake me at {time}", "please put my alarm clock on {time}", "make a daily alarm at {time}",
              "I want to stand up at {time}", "add one alarm at {time}", "an alarm at {time} , please",
              "are you able to wake me at {time} ?", "make sure that I am awake at {time}", "plan an alarm for {time}"],
    "reminder": ["remind me {day} to {todo}", "create a reminder to {todo}", "do not let me forget to {todo}",
                 "I need {day} a reminder to {todo}", "please remind me {day} to {todo}", "add {day} a reminder to {todo}",
                 "I have to remember to {todo}", "could you remind me {day} to {todo} ?", "I would like a reminder to {todo}",
                 "{day} remind me to {todo}"],
    "timer": ["put a timer on {duration}", "launch a timer for {duration}", "start a countdown of {duration}",
              "I need a timer of {duration}", "can you put a timer on {duration} ?", "a timer of {duration} for the noodles",
              "put the kitchen clock on {duration}", "start a countdown over {duration} please",
              "I would like a timer for {duration}", "put a timer on {duration} for my training"],
    "music": ["play a bit of {genre}", "I would like to hear {genre}", "turn on {genre} in the living room",
              "could you put on {genre} ?", "play some {genre} randomly", "put on {genre} for the party",
              "I feel like listening to {genre}", "please put on some {genre}", "put on {genre} for me while I am cooking",
              "let's hear {genre}"],
    "restaurant": ["reserve a table for {party_size} {day}", "search a good {cuisine} restaurant in {city}",
                   "I would like to go to a good {cuisine} restaurant {day}", "we require a table for {party_size}",
                   "does {city} have a good {cuisine} restaurant ?", "reserve a dinner for {party_size} {day}",
                   "can I have a table for {party_size} {day} ?", "do a booking for {party_size} {day}",
                   "suggest a good {cuisine} restaurant in {city}", "find us a table for {party_size} {day}"],
    "directions": ["how can I reach {destination} ?", "bring me to {destination}", "show me the road to {destination}",
                   "is it far to {destination} ?", "which is the quickest way to {destination} ?",
                   "give me the route to {destination}", "how long is the walk to {destination} ?",
                   "I have to go to {destination}", "lead me to {destination}", "in which direction is {destination} ?"],
    "message": ["send {contact} a message", "write to {contact} that I will come later", "tell {contact} that I am on the way",
                "write {contact} a message", "tell {contact} that the food is ready", "thank {contact} by message",
                "can you write to {contact} for me ?", "send {contact} a short note", "write {contact} a few lines to say hi",
                "answer {contact} that I agree"],
}
INTENTS = list(TEMPLATES)
SLOT_LABELS = ["O"] + [f"{p}-{label}" for label in dict.fromkeys(label for label, _ in SLOTS.values()) for p in ("B", "I")]


def render(words, lang):
    """Words -> text: Chinese without spaces; elsewhere no space before . , ? ! : or after ¿ ¡."""
    if lang == "zh":
        return "".join(words)
    text = " ".join(words)
    return re.sub(r"([¿¡]) ", r"\1", re.sub(r" ([.,?!:])", r"\1", text))


def fill(template, values, lang):
    """A template with its slot values filled in -> (words, BIO tags)."""
    words, tags = [], []
    for token in template.split():
        slot = re.fullmatch(r"\{(\w+)\}", token)
        if not slot:
            words.append(token)
            tags.append("O")
            continue
        label, by_lang = SLOTS[slot.group(1)]
        value = by_lang[lang][values[slot.group(1)]]
        inside, first = "[" not in value, True  # without brackets, every word is in the slot
        for word in value.split():
            inside = inside or word.startswith("[")
            words.append(word.strip("[]"))
            tags.append(("B-" if first else "I-") + label if inside else "O")
            first = first and not inside
            inside = inside and not word.endswith("]")
    return words, tags


def build(split, round_trip=False):
    """{lang: [Example]} for one split, the same ids in every language; with `round_trip`, the
    English round-trip renderings instead ({"en": [...]}, ids of the English examples they render)."""
    templates = {"train": TRAIN_TEMPLATES, "dev": DEV_TEMPLATES, "test": TEST_TEMPLATES}[split]
    langs = ["en"] if round_trip else LANGS
    out = {lang: [] for lang in langs}
    for intent in INTENTS:
        for k in templates:
            template = {"en": ROUND_TRIP[intent][k]} if round_trip else dict(zip(LANGS, TEMPLATES[intent][k]))
            slots = re.findall(r"\{(\w+)\}", TEMPLATES[intent][k][0])
            rng, seen = random.Random(f"{intent}/{k}"), set()
            combinations = math.prod(len(SLOTS[s][1]["en"]) for s in slots)
            while len(seen) < min(EXAMPLES_PER_TEMPLATE[split], combinations):
                values = {s: rng.randrange(len(SLOTS[s][1]["en"])) for s in slots}
                key = tuple(sorted(values.items()))
                if key in seen:
                    continue
                seen.add(key)
                for lang in langs:
                    words, tags = fill(template[lang], values, lang)
                    out[lang].append(Example(id=f"{intent}.{k}.{len(seen)}", lang=lang, text=render(words, lang),
                                             label=intent, words=words, tags=tags))
    return out


class Demo(Layout):
    """The bundled corpus's intents (py); no files."""
    langs, labels, needs_data, pattern = LANGS, INTENTS, False, "the bundled corpus"

    def read(self, lang, split):
        return self.once(split, lambda: build(split))[lang]

    def round_trip(self):
        return {e.id: e for e in build("train", round_trip=True)["en"]} if self.source == "en" else {}

class DemoSlots(Demo):
    """The bundled corpus's BIO slots."""
    labels, level = SLOT_LABELS, "word"
