/* The conversation page, enhanced (kinds/chat/pages.py): a message is posted in the background and the reply
   streams back as lines of JSON, shown word by word; a page shown with a reply pending asks for it at once.
   Without this script the same forms post plainly and the reply appears on the next page. */
(function () {
  "use strict";
  var form = document.querySelector("[data-chat-form]");
  var log = document.getElementById("chat-log");
  var status = document.getElementById("chat-status");
  var finish = document.getElementById("chat-finish");
  if (!form || !log || !window.fetch || !window.TextDecoder) { return; }
  var partner = log.getAttribute("data-partner") || "Your partner";
  var sent = parseInt(form.getAttribute("data-sent"), 10) || 0;
  var minTurns = parseInt(form.getAttribute("data-min-turns"), 10) || 1;
  var maxTurns = parseInt(form.getAttribute("data-max-turns"), 10) || 1;
  var busy = false;

  function bubble(role, text) {
    var li = document.createElement("li");
    li.className = "chat-turn chat-" + role;
    var who = document.createElement("span");
    who.className = "chat-who";
    who.textContent = role === "participant" ? "You" : partner;
    var body = document.createElement("span");
    body.className = "chat-text";
    body.textContent = text;
    li.appendChild(who);
    li.appendChild(document.createTextNode(" "));
    li.appendChild(body);
    log.appendChild(li);
    return body;
  }

  function say(text) { status.textContent = text || ""; }

  function words(target, text, done) {
    // Shows `text` word by word after what `target` already holds.
    var parts = text.split(/(\s+)/);
    var i = 0;
    (function step() {
      if (i >= parts.length) { done(); return; }
      target.textContent += parts[i] + (parts[i + 1] || "");
      i += 2;
      window.setTimeout(step, 35);
    })();
  }

  function settle(ok) {
    busy = false;
    delete form.dataset.sent;
    var left = maxTurns - sent;
    form.querySelectorAll("[data-remaining]").forEach(function (n) { n.textContent = String(Math.max(left, 0)); });
    form.hidden = !ok || left <= 0;
    if (finish) { finish.hidden = !(sent >= minTurns || left <= 0); }
    if (!form.hidden) { form.querySelector("textarea").focus(); }
    else if (finish && !finish.hidden) { finish.querySelector("button").focus(); }
  }

  function stream(data) {
    busy = true;
    form.hidden = true;
    if (finish) { finish.hidden = true; }
    say("Your reply is on its way.");
    var target = null;
    var queue = Promise.resolve();
    fetch(form.getAttribute("action"), {
      method: "POST", body: data, credentials: "same-origin",
      headers: { "Accept": "application/x-ndjson", "X-CSRFToken": data.get("csrfmiddlewaretoken") }
    }).then(function (response) {
      if (response.status === 400) {
        return response.text().then(function (t) {
          var msg = ""; try { msg = JSON.parse(t).refused; } catch (e) { msg = ""; }
          say(msg || "The message could not be sent."); settle(true);
        });
      }
      if (!response.ok || !response.body) { window.location.reload(); return; }
      var reader = response.body.getReader();
      var decoder = new TextDecoder();
      var buffer = "";
      function handle(line) {
        if (!line) { return; }
        var event = JSON.parse(line);
        if (event.go) { window.location.reload(); return; }
        if (event.wait) { say(event.wait); }
        if (event.reset && target) { queue = queue.then(function () { target.textContent = ""; }); }
        if (event.chunk) {
          if (!target) { target = bubble("responder", ""); say(partner + " is writing."); }
          queue = queue.then(function () { return new Promise(function (r) { words(target, event.chunk, r); }); });
        }
        if (event.done !== undefined) {
          queue = queue.then(function () {
            if (!target) { target = bubble("responder", ""); }
            target.textContent = event.text;
            say(""); settle(true);
          });
        }
        if (event.failed) {
          queue = queue.then(function () { say(event.failed); showResume(); });
        }
      }
      function pump() {
        return reader.read().then(function (r) {
          if (r.done) { handle(buffer.trim()); return; }
          buffer += decoder.decode(r.value, { stream: true });
          var lines = buffer.split("\n");
          buffer = lines.pop();
          lines.forEach(function (l) { handle(l.trim()); });
          return pump();
        });
      }
      return pump();
    }).catch(function () {
      say("The connection was lost. Your message is saved.");
      showResume();
    });
  }

  function showResume() {
    busy = false;
    var again = document.querySelector("[data-chat-resume]");
    if (again) { again.hidden = false; return; }
    again = document.createElement("button");
    again.type = "button";
    again.className = "button primary";
    again.textContent = "Try again";
    again.setAttribute("data-chat-resume", "");
    again.addEventListener("click", function () { again.remove(); resume(); });
    status.insertAdjacentElement("afterend", again);
  }

  function resume() {
    var data = new FormData(form);
    data.set("action", "resume");
    data.delete("message");
    stream(data);
  }

  form.addEventListener("submit", function (event) {
    event.preventDefault();
    if (busy) { return; }
    var box = form.querySelector("textarea");
    var text = box.value.trim();
    var min = parseInt(form.getAttribute("data-min"), 10) || 1;
    if (text.length < min) { say("Please write at least " + min + " characters."); box.focus(); return; }
    var data = new FormData(form);
    bubble("participant", text);
    box.value = "";
    sent += 1;
    stream(data);
  });

  var pending = document.querySelector("form[data-chat-resume]");
  if (pending) {
    pending.hidden = true;
    pending.addEventListener("submit", function (event) { event.preventDefault(); pending.remove(); resume(); });
    resume();
  }
})();
