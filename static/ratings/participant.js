/* Progressive enhancement of the participant pages; everything works without it.
   - One request per step: the step forms (consent, instructions, the TEQ: `data-step-form`) are posted in
     the background (fetch, the same fields the form sends, CSRF token and honeypot included) and the server
     replies with the page of the participant's new step, which replaces this one here (no redirect, no
     second request). The first item's page comes as the item page's shell, the same for everyone, with the
     item beside it, shown as an answer's next item is shown. Focus moves to the new page's heading (or its error summary); the address becomes the
     step page (a new history entry, so a refresh shows the same step and Back reloads the step page).
   - The consent page carries the instructions page (`#next-step`): "I agree" shows them here without a
     request, and their button posts the consent with them (`agreed=1`): one request for both. The consent
     goes on its own, in the background, before the participant's place would stop being held (`hold`
     seconds after the page was loaded, less a margin) and when the page is hidden or left, so that a
     participant who reads slowly or switches apps keeps their place.
   - Where the instructions lead to the items, the consent page also carries the first item (`#first-item`,
     the item page's shell and the item): the instructions' button shows it without a request, and the first
     answer posts the consent and the instructions with it (`agreed=1`, `begun=1`, and `shown_ms`, how long
     the item was on screen, for its response time): one request for all three. A refresh before that
     answer shows the same item again (the tab remembers it: sessionStorage); leaving the page sends the
     instructions on their own, so the study link later shows that item too.
   - In-place answers: the item form is posted the same way and the server answers with the next item as
     JSON, which replaces the current one here: one small request per answer. Focus moves to the new item's
     heading and a polite live region says "Item N of M". The last answer's reply is the completion page,
     shown the same way. A lost connection keeps the answer selected and sends it again by itself (the same
     position: the server stores it once): as soon as the browser is back online, and after a growing wait
     (2 s, 4 s, … at most a minute) in case it never says so; a button sends it at once. Anything else the
     server refuses is posted again the plain way, so the participant sees the server's page.
   - Keyboard shortcuts on the item page: 1, 2, 3, ... press the matching scale button (on the pair page:
     A, B, about the same; still after ticking its "both inadequate" box).
   - The answer bar's "scroll down" tag, in browsers whose CSS cannot tell that the bar sticks.
   - A form is sent once: a double click or a held key does not send a second answer
     (the server ignores a second answer anyway; this only spares the request).
   - An error summary takes the focus, so screen readers read it and Tab reaches its links first.
   - The completion page gets a "Copy the code" button.
   - After the browser's Back button, the item page says the previous answer was saved. */
(function () {
  "use strict";
  var canSend = !!(window.fetch && window.URLSearchParams && window.FormData && window.DOMParser &&
    "SubmitEvent" in window && "submitter" in SubmitEvent.prototype && window.history && history.replaceState);
  var current = { buttons: [], form: null, sending: null, stuck: null };  // the item page's answer form
  var BACK = "participant-back";
  var loaded = Date.now();
  var HOLD_MARGIN_MS = 120000;  // the consent is sent on its own this long before its hold would end
  var firstItem = null;  // the first item the consent page carried, until the instructions' button shows it
  var AHEAD = "participant-first-item";  // this tab shows its first item ahead: {key, since}, until answered

  document.addEventListener("keydown", function (event) {
    var form = current.form;
    if (!form || event.ctrlKey || event.metaKey || event.altKey || event.repeat ||
        (current.sending && current.sending.busy())) { return; }
    var target = event.target;
    // Keys typed into a field are the field's; a ticked box (the pair page's "both inadequate") keeps them.
    var typing = target && (target.isContentEditable || /^(TEXTAREA|SELECT)$/.test(target.tagName) ||
      (target.tagName === "INPUT" && !/^(checkbox|radio)$/.test(target.type)));
    if (typing) { return; }
    for (var i = 0; i < current.buttons.length; i++) {
      var button = current.buttons[i];
      if (button.dataset.shortcut === event.key) {
        event.preventDefault();
        button.focus();
        if (form.requestSubmit) { form.requestSubmit(button); } else { button.click(); }
        return;
      }
    }
  });
  window.addEventListener("popstate", function () {
    // Back (or forward) to a page that was shown in place: the server has moved on, so the step page shows
    // where the participant is now, saying (on an item) that the earlier answer was saved.
    try { window.sessionStorage.setItem(BACK, "1"); } catch (e) { /* the note is a nicety */ }
    window.location.reload();
  });
  enhance(false);
  if (canSend) { restoreAhead(); }

  function enhance(replaced) {
    var form = document.querySelector("[data-answer-form]");
    var inPlace = canSend && !!form && form.hasAttribute("data-in-place");
    document.querySelectorAll("form").forEach(function (f) {
      if (inPlace && f === form) { return; }  // sent by answerInPlace below, once per item
      if (canSend && f.hasAttribute("data-step-form")) { stepInPlace(f); return; }
      f.addEventListener("submit", function (event) {
        if (f.dataset.sent) { event.preventDefault(); return; }
        f.dataset.sent = "1";
      });
    });
    errorSummary();
    copyButton();
    var backNote = document.querySelector("[data-back-note]");
    var cameBack = false;
    try {
      cameBack = window.sessionStorage.getItem(BACK) === "1";
      window.sessionStorage.removeItem(BACK);
    } catch (e) { /* no storage: only the browser's own back navigation is seen */ }
    if (backNote && !replaced) {
      var showBackNote = function () { backNote.hidden = false; backNote.setAttribute("role", "status"); };
      var navigation = window.performance && performance.getEntriesByType
        ? performance.getEntriesByType("navigation")[0] : null;
      if (cameBack || (navigation && navigation.type === "back_forward")) { showBackNote(); }
      window.addEventListener("pageshow", function (event) { if (event.persisted) { showBackNote(); } });
    }
    current.form = form;
    current.buttons = form ? form.querySelectorAll("[data-shortcut]") : [];
    current.stuck = stuckTag(form);
    current.sending = inPlace ? answerInPlace(form, current.buttons, backNote) : null;
    if (form) {
      form.querySelectorAll(".shortcut-key, .shortcut-hint").forEach(function (el) { el.hidden = false; });
    }
  }

  function stuckTag(form) {
    // The bar sticks while the conversation's end is under it; CSS says so where it can (scroll-state
    // queries), else this marks the bar `.is-stuck` on every scroll, resize and new item.
    var bar = form && form.querySelector("[data-answer-bar]");
    var dialogue = form && form.querySelector(".dialogue");
    if (!bar || !dialogue || (window.CSS && CSS.supports && CSS.supports("container-type", "scroll-state"))) {
      return null;
    }
    var update = function () {
      if (!bar.isConnected) { return; }
      bar.classList.toggle("is-stuck", dialogue.getBoundingClientRect().bottom > bar.getBoundingClientRect().top + 1);
    };
    window.addEventListener("scroll", update, { passive: true });
    window.addEventListener("resize", update);
    update();
    return update;
  }

  function errorSummary() {
    var summary = document.querySelector("[data-error-summary]");
    if (!summary) { return; }
    if (document.activeElement !== summary) { summary.focus(); }
    // A link in the summary moves the focus to the answer it names (the fragment alone only scrolls),
    // showing the whole statement, not just its first radio button.
    summary.addEventListener("click", function (event) {
      var link = event.target.closest("a[href^='#']");
      var target = link && document.getElementById(link.getAttribute("href").slice(1));
      if (!target) { return; }
      event.preventDefault();
      var group = target.closest("fieldset") || target;
      group.scrollIntoView({ block: "start" });
      target.focus({ preventScroll: true });
    });
  }

  function copyButton() {
    var copyRow = document.querySelector("[data-copy-row]");
    var code = document.querySelector("[data-completion-code]");
    if (!copyRow || !code) { return; }
    var status = copyRow.querySelector("[data-copy-status]");
    var copied = function () { status.textContent = "Copied."; };
    var selectCode = function () {
      var range = document.createRange();
      range.selectNodeContents(code);
      var selection = window.getSelection();
      selection.removeAllRanges();
      selection.addRange(range);
    };
    copyRow.hidden = false;
    copyRow.querySelector("[data-copy-code]").addEventListener("click", function () {
      var text = code.textContent.trim();
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(text).then(copied, function () {
          selectCode();
          status.textContent = "Copying was blocked: the code is selected, copy it with your keyboard or menu.";
        });
        return;
      }
      selectCode();
      try {
        if (document.execCommand("copy")) { copied(); return; }
      } catch (e) { /* fall through to the manual hint */ }
      status.textContent = "The code is selected: copy it with your keyboard or menu.";
    });
  }

  // --- sending forms in the background ------------------------------------------------------------------

  // The form's address as written: `form.action` is a field's element when the form has one named "action"
  // (the chat's finish button sends action=finish).
  function actionOf(form) { return form.getAttribute("action"); }

  function formBody(form, submitter) {
    var body = new URLSearchParams();
    new FormData(form).forEach(function (value, name) { body.append(name, value); });
    if (submitter && submitter.name) { body.append(submitter.name, submitter.value); }
    return body.toString();
  }

  function post(form, body) {
    return fetch(actionOf(form), {
      method: "POST",
      body: body,
      credentials: "same-origin",
      headers: { "Accept": "application/json", "Content-Type": "application/x-www-form-urlencoded" }
    }).then(function (response) {
      var json = (response.headers.get("Content-Type") || "").indexOf("application/json") === 0;
      return json ? response.json().then(function (data) { return { status: response.status, data: data }; })
        : { status: response.status, data: null };
    });
  }

  function plainly(form, submitter) {
    // The server's own page says what went wrong: post the same form the plain way.
    if (submitter && submitter.name) {
      var field = document.createElement("input");
      field.type = "hidden";
      field.name = submitter.name;
      field.value = submitter.value;
      form.appendChild(field);
    }
    HTMLFormElement.prototype.submit.call(form);
  }

  function showPage(html, url) {
    // The page of the participant's next step, sent with the reply: it replaces this one.
    var next = new DOMParser().parseFromString(html, "text/html");
    next.querySelectorAll("script").forEach(function (script) { script.remove(); });  // already running
    document.title = next.title;
    document.documentElement.replaceChild(document.adoptNode(next.body), document.body);
    history.pushState(null, "", url);  // a new step, as a page load would be: Back comes back here (popstate)
    window.scrollTo(0, 0);
    enhance(true);
    var focus = document.querySelector("[data-error-summary]") || document.querySelector("main h1") ||
      document.getElementById("main");
    if (focus && document.activeElement !== focus) {
      if (!focus.hasAttribute("tabindex")) { focus.setAttribute("tabindex", "-1"); }
      focus.focus();
    }
  }

  function nextStep() {
    // The page of the step after this one, sent with this page (shared_pages.consent_page), or null.
    return carried("next-step");
  }

  function carried(id) {
    var data = document.getElementById(id);
    try { return data ? JSON.parse(data.textContent) : null; } catch (e) { return null; }
  }

  function restoreAhead() {
    // A refresh (or Back) while the first item was shown ahead: the server still has the participant on the
    // consent step and sends its page. This tab agreed and read the instructions already, so the item is
    // shown again at once, as it was (the same participant's item, its time on screen still counting).
    var kept = null;
    try { kept = JSON.parse(window.sessionStorage.getItem(AHEAD) || "null"); } catch (e) { return; }
    var ahead = nextStep();
    var item = carried("first-item");
    var form = document.querySelector("form[data-step-form]");
    var agree = form && form.querySelector("button[name='decision'][value='agree']");
    if (!kept || !ahead || !item || !agree || kept.key !== item.key) { return; }
    firstItem = item;
    var consent = { action: actionOf(form), body: formBody(form, agree) };
    showPage(ahead.page, ahead.url);
    consentAhead(consent, ahead.hold);
    beginAhead(document.querySelector("form[data-step-form]"), kept.since);
  }

  function beginAhead(instructions, shownSince) {
    // The instructions done: the first item the consent page carried is shown without a request, as the
    // instructions' reply would show it. Its form takes what is still to be sent (the consent, if it has not
    // gone on its own; the instructions) to the first answer, which says how long the item was on screen.
    var item = firstItem;
    var agreed = instructions.querySelector("input[name='agreed']");
    firstItem = null;
    showPage(item.page, item.url);
    var form = current.form;
    if (!current.sending || !form) { window.location.reload(); return; }
    current.sending.show(item.item);
    if (agreed) { form.appendChild(agreed); }  // still sent on its own at the hold's end or on leaving
    [["begun", "1"], ["shown_ms", "0"]].forEach(function (pair) {
      var field = document.createElement("input");
      field.type = "hidden";
      field.name = pair[0];
      field.value = pair[1];
      field.setAttribute("data-ahead", "");
      form.appendChild(field);
    });
    var since = shownSince || Date.now();
    try {
      window.sessionStorage.setItem(AHEAD, JSON.stringify({ key: item.key, since: since }));
    } catch (e) { /* no storage: a refresh shows the consent page again */ }
    var begun = form.querySelector("input[name='begun']");
    form.querySelector("input[name='shown_ms']").dataset.since = String(since);
    // Left before the first answer (another address, a closed tab): the instructions go on their own, with
    // the consent if it is still to be sent, so that the study link shows this item again later. The request
    // outlives the page (it reaches the server after a refresh's own request: the tab's memory above covers
    // that).
    window.addEventListener("pagehide", function () {
      if (!begun.isConnected || !navigator.sendBeacon) { return; }  // sent with the first answer
      var body = new URLSearchParams(formBody(instructions));
      if (agreed && agreed.isConnected) { body.append("agreed", "1"); }
      body.append("begun", "1");
      body.append("shown_ms", String(Date.now() - since));
      navigator.sendBeacon(instructions.action, body);
    }, { once: true });
  }

  function consentAhead(consent, hold) {
    // The consent was agreed to and the instructions shown without a request: their form carries it
    // (agreed=1), or it is sent on its own if the participant is still reading near the end of the hold, or
    // leaves or hides the page (the request outlives the page).
    var form = document.querySelector("form[data-step-form]");
    if (!form) { return; }
    var field = document.createElement("input");
    field.type = "hidden";
    field.name = "agreed";
    field.value = "1";
    form.appendChild(field);
    var alone = false;
    function send(leaving) {
      if (alone || !field.isConnected || form.dataset.sent) { return; }  // sent, or going with the form
      alone = true;
      if (leaving && navigator.sendBeacon) {
        navigator.sendBeacon(consent.action, new URLSearchParams(consent.body));
        return;
      }
      fetch(consent.action, {
        method: "POST", body: consent.body, credentials: "same-origin", keepalive: true,
        headers: { "Accept": "application/json", "Content-Type": "application/x-www-form-urlencoded" }
      }).catch(function () { alone = false; });  // not sent: the instructions' button still carries it
    }
    var left = hold * 1000 - HOLD_MARGIN_MS - (Date.now() - loaded);
    window.setTimeout(function () { send(false); }, Math.max(0, left));
    document.addEventListener("visibilitychange", function () {
      if (document.visibilityState === "hidden") { send(true); }
    });
    window.addEventListener("pagehide", function () { send(true); });
  }

  function stepInPlace(form) {
    var notice = null;
    var ahead = nextStep();
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      if (form.dataset.sent) { return; }
      var submitter = event.submitter;
      if (ahead && submitter && submitter.name === "decision" && submitter.value === "agree") {
        var consent = { action: actionOf(form), body: formBody(form, submitter) };
        firstItem = carried("first-item");
        showPage(ahead.page, ahead.url);
        consentAhead(consent, ahead.hold);
        return;
      }
      if (firstItem && form.querySelector("input[name='step'][value='instructions']")) {
        beginAhead(form);
        return;
      }
      form.dataset.sent = "1";
      form.setAttribute("aria-busy", "true");
      post(form, formBody(form, submitter)).then(function (reply) {
        if (reply.data && reply.data.page) {
          showPage(reply.data.page, reply.data.url);
          // The item page comes as a shell with the item beside it: shown as an answer's next item is.
          if (reply.data.item && current.sending) { current.sending.show(reply.data.item); }
          return;
        }
        if (reply.data && reply.data.next) { window.location.assign(reply.data.next); return; }
        plainly(form, submitter);
      }, function () {
        // Nothing arrived: the connection was lost. The form stays as it was, ready to be sent again.
        delete form.dataset.sent;
        form.setAttribute("aria-busy", "false");
        if (!notice) {
          notice = document.createElement("p");
          notice.className = "notice retry";
          notice.setAttribute("role", "alert");
          form.insertBefore(notice, form.firstChild);
        }
        notice.textContent = "This was not sent: the connection was lost. Please press the button again.";
      });
    });
  }

  function answerInPlace(form, buttons, backNote) {
    var heading = document.querySelector("[data-item-heading]");
    var bar = document.querySelector("[data-item-progress]");
    var live = document.querySelector("[data-item-live]");
    var retry = form.querySelector("[data-retry]");
    var position = form.querySelector("input[name='position']");
    var texts = {
      emotion: form.querySelector("[data-emotion]"),
      situation: form.querySelector("[data-situation]"),
      utterance: form.querySelector("[data-utterance]"),
      response: form.querySelector("[data-response]")
    };
    var pending = null;  // {body, button}: the answer in flight, or waiting to be sent again
    var busy = false;
    var resend = { timer: 0, wait: 0 };  // the automatic re-send of an answer that was not sent

    function setBusy(on) {
      busy = on;
      form.setAttribute("aria-busy", on ? "true" : "false");
      buttons.forEach(function (button) { button.disabled = on; });
    }
    function mark(chosen) {
      buttons.forEach(function (button) {
        if (button === chosen) { button.setAttribute("aria-pressed", "true"); }
        else { button.removeAttribute("aria-pressed"); }
      });
    }
    function show(item) {
      position.value = item.position;
      heading.textContent = "Item " + item.number + " of " + item.total;
      bar.max = item.total;
      bar.value = item.answered;
      bar.textContent = item.answered + " of " + item.total + " done";
      Object.keys(texts).forEach(function (key) { if (texts[key]) { texts[key].textContent = item[key]; } });
      document.title = item.title;
      if (backNote) { backNote.hidden = true; }
      pending = null;
      calmDown();
      retry.hidden = true;
      mark(null);
      setBusy(false);
      // The step page always shows the current item: a refresh lands here too.
      history.replaceState({ position: item.position }, "", actionOf(form));
      window.scrollTo(0, 0);
      if (current.stuck) { current.stuck(); }
      heading.focus();
      live.textContent = "";
      window.setTimeout(function () { live.textContent = "Item " + item.number + " of " + item.total; }, 50);
    }
    function sentAhead() {
      // The consent and the instructions went with the first answer: later answers do not carry them.
      form.querySelectorAll("input[data-ahead], input[name='agreed']").forEach(function (field) {
        field.remove();
      });
      try { window.sessionStorage.removeItem(AHEAD); } catch (e) { /* nothing kept */ }
    }
    function calmDown() {
      window.clearTimeout(resend.timer);
      resend.timer = 0;
      resend.wait = 0;
    }
    function failed() {
      setBusy(false);
      retry.hidden = false;
      retry.querySelector("[data-retry-button]").focus();
      later();
    }
    function later() {
      // Sent again by itself after a growing wait, with jitter so that a room of participants whose
      // connection came back together does not answer at the same instant.
      window.clearTimeout(resend.timer);
      resend.wait = Math.min(resend.wait ? resend.wait * 2 : 2000, 60000);
      resend.timer = window.setTimeout(again, resend.wait * (0.75 + Math.random() / 2));
    }
    function again() {
      // The pending answer of this page (not of an item page since replaced), unless one is in flight.
      if (!pending || busy || !form.isConnected) { return; }
      if (navigator.onLine === false) { later(); return; }  // still offline: the `online` event will say
      send();
    }
    window.addEventListener("online", again);
    function send() {
      window.clearTimeout(resend.timer);
      setBusy(true);
      mark(pending.button);
      post(form, pending.body).then(function (reply) {
        if (reply.data) { sentAhead(); }
        if (reply.data && reply.data.item) { show(reply.data.item); return; }
        if (reply.data && (reply.data.page || reply.data.next)) { pending = null; calmDown(); }
        if (reply.data && reply.data.page) { showPage(reply.data.page, reply.data.url); return; }
        if (reply.data && reply.data.next) { window.location.assign(reply.data.next); return; }
        if (reply.status === 429 || reply.status >= 500) { failed(); return; }
        plainly(form, pending.button);
      }, failed);
    }

    form.addEventListener("submit", function (event) {
      var button = event.submitter;
      if (!button || !button.name) { return; }  // not one of the answers: let the form go the plain way
      event.preventDefault();
      if (busy) { return; }
      var shown = form.querySelector("input[name='shown_ms']");
      if (shown) { shown.value = String(Date.now() - Number(shown.dataset.since)); }
      pending = { body: formBody(form, button), button: button };
      retry.hidden = true;
      send();
    });
    retry.querySelector("[data-retry-button]").addEventListener("click", function () {
      if (pending && !busy) { resend.wait = 0; send(); }
    });
    return { busy: function () { return busy; }, show: show };
  }
})();
