/* Authenticity signals: how a page was answered, sent with its own form (no request of its own).
   Whatever the study kind, every form a step page submits gets a hidden field `sig` just before it is sent
   (a submit listener on the document, in the capture phase: it runs before participant.js builds the
   background post from the form's fields, and before a plain post leaves). It holds counts and times only,
   never what was typed or where the pointer went:
     t   ms the page (or the item shown in place) was on screen      fi  ms to the first pointer/touch/key event
     pm  pointer moves (mouse, pen)   pd  pointer downs   tp  of which touches   k  key presses
     cl  clicks the browser made (a pointer, a key, a screen reader's activation)
     sc  clicks or key presses dispatched by a script
     bl  times the window lost the focus   vh  times the page was hidden   hm  ms hidden
     ps  pastes into text fields   pc  characters pasted   tc  characters typed   tm  ms from first to last keystroke
     c   the browser: au automation hints it exposes, sw/sh screen size, mt touch points
   The server (studies/authenticity.py) clamps every number and drops anything else. The counts start again
   once a form is sent (the next item shown in place is a new page). Described on the consent page. */
(function () {
  "use strict";
  var counts, started, firstAt, hiddenSince, typedFirst, typedLast;

  function reset() {
    counts = { pm: 0, pd: 0, tp: 0, k: 0, cl: 0, sc: 0, bl: 0, vh: 0, hm: 0, ps: 0, pc: 0, tc: 0 };
    started = Date.now();
    firstAt = null;
    typedFirst = typedLast = null;
    hiddenSince = document.visibilityState === "hidden" ? Date.now() : null;
  }
  reset();

  function interacted(event) {
    if (event.isTrusted && firstAt === null) { firstAt = Date.now(); }
  }
  function isText(target) {
    return !!target && (target.tagName === "TEXTAREA" ||
      (target.tagName === "INPUT" && /^(text|search|email|url|tel|number|)$/.test(target.type || "")));
  }

  function automationHints() {
    var hints = [];
    var w = window;
    if (navigator.webdriver === true) { hints.push("webdriver"); }
    if (w.callPhantom || w._phantom) { hints.push("phantom"); }
    if (w.__nightmare) { hints.push("nightmare"); }
    if (w._selenium || w.__selenium_unwrapped || document.__webdriver_evaluate) { hints.push("selenium"); }
    if (w.domAutomation || w.domAutomationController) { hints.push("domautomation"); }
    try {
      if (Object.keys(document).some(function (key) { return key.indexOf("$cdc_") === 0 || key.indexOf("cdc_") === 0; })) {
        hints.push("cdc");
      }
    } catch (e) { /* nothing to read */ }
    return hints;
  }

  var opts = { capture: true, passive: true };
  document.addEventListener("pointermove", function (event) {
    if (!event.isTrusted || event.pointerType === "touch") { return; }
    counts.pm += 1;
    interacted(event);
  }, opts);
  document.addEventListener("pointerdown", function (event) {
    if (!event.isTrusted) { counts.sc += 1; return; }
    counts.pd += 1;
    if (event.pointerType === "touch") { counts.tp += 1; }
    interacted(event);
  }, opts);
  document.addEventListener("keydown", function (event) {
    if (!event.isTrusted) { counts.sc += 1; return; }
    counts.k += 1;
    interacted(event);
    if (isText(event.target) && event.key && event.key.length === 1) {
      typedLast = Date.now();
      if (typedFirst === null) { typedFirst = typedLast; }
    }
  }, opts);
  document.addEventListener("click", function (event) {
    if (event.isTrusted) { counts.cl += 1; } else { counts.sc += 1; }
  }, opts);
  document.addEventListener("input", function (event) {
    if (event.isTrusted && isText(event.target) && event.inputType === "insertText" && event.data) {
      counts.tc += event.data.length;
    }
  }, opts);
  document.addEventListener("paste", function (event) {
    if (!isText(event.target)) { return; }
    counts.ps += 1;
    var text = event.clipboardData ? event.clipboardData.getData("text") : "";
    counts.pc += text.length;
  }, opts);
  window.addEventListener("blur", function (event) {
    if (event.target === window) { counts.bl += 1; }
  });
  document.addEventListener("visibilitychange", function () {
    if (document.visibilityState === "hidden") {
      counts.vh += 1;
      hiddenSince = Date.now();
    } else if (hiddenSince !== null) {
      counts.hm += Date.now() - hiddenSince;
      hiddenSince = null;
    }
  });

  function snapshot() {
    var now = Date.now();
    var out = {};
    Object.keys(counts).forEach(function (key) { if (counts[key]) { out[key] = counts[key]; } });
    if (hiddenSince !== null) { out.hm = (out.hm || 0) + now - hiddenSince; }
    out.t = now - started;
    if (firstAt !== null) { out.fi = firstAt - started; }
    if (typedFirst !== null) { out.tm = typedLast - typedFirst; }
    var screen = window.screen || {};
    out.c = { au: automationHints(), sw: screen.width || 0, sh: screen.height || 0, mt: navigator.maxTouchPoints || 0 };
    return JSON.stringify(out);
  }

  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (!form || form.method.toLowerCase() !== "post" || !form.querySelector("input[name='step']")) { return; }
    var field = form.querySelector("input[name='sig']");
    if (!field) {
      field = document.createElement("input");
      field.type = "hidden";
      field.name = "sig";
      form.appendChild(field);
    }
    field.value = snapshot();
    reset();
  }, true);
})();
