/* Progressive enhancement of the participant pages; everything works without it.
   - Keyboard shortcuts on the item page: 1, 2, 3, ... press the matching scale button.
   - A form is sent once: a double click or a held key does not send a second answer
     (the server ignores a second answer anyway; this only spares the request).
   - An error summary takes the focus, so screen readers read it and Tab reaches its links first.
   - The completion page gets a "Copy the code" button.
   - After the browser's Back button, the item page says the previous answer was saved. */
(function () {
  "use strict";
  var form = document.querySelector("[data-answer-form]");
  document.querySelectorAll("form").forEach(function (f) {
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
  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey || event.repeat) { return; }
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
})();
