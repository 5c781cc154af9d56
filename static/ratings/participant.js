/* Progressive enhancement of the participant pages; everything works without it.
   - Keyboard shortcuts on the item page: 1, 2, 3, ... press the matching scale button.
   - A form is sent once: a double click or a held key does not send a second answer
     (the server ignores a second answer anyway; this only spares the request).
   - An error summary takes the focus, so screen readers read it and Tab reaches its links first.
   - The completion page gets a "Copy the code" button.
   - After the browser's Back button, the item page says the previous answer was saved.
   - In-place answers: the item form is posted in the background (fetch, the same fields the form sends,
     CSRF token and honeypot included) and the server answers with the next item as JSON, which replaces
     the current one here: one small request per answer instead of a POST and a full page. Focus moves to
     the new item's heading and a polite live region says "Item N of M". A lost connection keeps the
     answer selected and offers to send it again (the same position: the server stores it once). Anything
     else the server refuses is posted again the plain way, so the participant sees the server's page. */
(function () {
  "use strict";
  var form = document.querySelector("[data-answer-form]");
  var inPlace = !!(form && form.hasAttribute("data-in-place") && window.fetch && window.URLSearchParams &&
    window.FormData && "SubmitEvent" in window && "submitter" in SubmitEvent.prototype);
  document.querySelectorAll("form").forEach(function (f) {
    if (inPlace && f === form) { return; }  // sent by answerInPlace below, once per item
    f.addEventListener("submit", function (event) {
      if (f.dataset.sent) { event.preventDefault(); return; }
      f.dataset.sent = "1";
    });
  });
  var summary = document.querySelector("[data-error-summary]");
  if (summary) {
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

  var copyRow = document.querySelector("[data-copy-row]");
  var code = document.querySelector("[data-completion-code]");
  if (copyRow && code) {
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

  var backNote = document.querySelector("[data-back-note]");
  if (backNote) {
    var showBackNote = function () { backNote.hidden = false; backNote.setAttribute("role", "status"); };
    var navigation = window.performance && performance.getEntriesByType
      ? performance.getEntriesByType("navigation")[0] : null;
    if (navigation && navigation.type === "back_forward") { showBackNote(); }
    window.addEventListener("pageshow", function (event) { if (event.persisted) { showBackNote(); } });
  }

  if (!form) { return; }
  var buttons = form.querySelectorAll("[data-shortcut]");
  form.querySelectorAll(".shortcut-key, .shortcut-hint").forEach(function (el) { el.hidden = false; });
  var sending = inPlace ? answerInPlace(form, buttons, backNote) : { busy: function () { return false; } };
  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey || event.repeat || sending.busy()) { return; }
    var target = event.target;
    if (target && (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName))) { return; }
    for (var i = 0; i < buttons.length; i++) {
      if (buttons[i].dataset.shortcut === event.key) {
        event.preventDefault();
        buttons[i].focus();
        if (form.requestSubmit) { form.requestSubmit(buttons[i]); } else { buttons[i].click(); }
        return;
      }
    }
  });

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
      retry.hidden = true;
      mark(null);
      setBusy(false);
      // The step page always shows the current item: a refresh lands here too.
      if (window.history && history.replaceState) { history.replaceState({ position: item.position }, "", form.action); }
      window.scrollTo(0, 0);
      heading.focus();
      live.textContent = "";
      window.setTimeout(function () { live.textContent = "Item " + item.number + " of " + item.total; }, 50);
    }
    function failed() {
      setBusy(false);
      retry.hidden = false;
      retry.querySelector("[data-retry-button]").focus();
    }
    function plainly() {
      // The server's own page says what went wrong: post the same answer as the form would.
      var field = document.createElement("input");
      field.type = "hidden";
      field.name = pending.button.name;
      field.value = pending.button.value;
      form.appendChild(field);
      form.submit();
    }
    function send() {
      setBusy(true);
      mark(pending.button);
      fetch(form.action, {
        method: "POST",
        body: pending.body,
        credentials: "same-origin",
        headers: { "Accept": "application/json", "Content-Type": "application/x-www-form-urlencoded" }
      }).then(function (response) {
        var json = (response.headers.get("Content-Type") || "").indexOf("application/json") === 0;
        return json ? response.json().then(function (data) { return { status: response.status, data: data }; })
          : { status: response.status, data: null };
      }).then(function (reply) {
        if (reply.data && reply.data.item) { show(reply.data.item); return; }
        if (reply.data && reply.data.next) { window.location.assign(reply.data.next); return; }
        if (reply.status === 429 || reply.status >= 500) { failed(); return; }
        plainly();
      }, failed);
    }

    form.addEventListener("submit", function (event) {
      var button = event.submitter;
      if (!button || !button.name) { return; }  // not one of the answers: let the form go the plain way
      event.preventDefault();
      if (busy) { return; }
      var body = new URLSearchParams();
      new FormData(form).forEach(function (value, name) { body.append(name, value); });
      body.append(button.name, button.value);
      pending = { body: body.toString(), button: button };
      retry.hidden = true;
      send();
    });
    retry.querySelector("[data-retry-button]").addEventListener("click", function () {
      if (pending && !busy) { send(); }
    });
    return { busy: function () { return busy; } };
  }
})();
