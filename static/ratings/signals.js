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
     pp  points of the pointer's path (pointer moves with the ones the browser coalesced into them)
     lv  pointer moves continuing a straight line at the same speed as the two before (a program's steps)
     sm  pointer moves continuing a perfectly smooth curve (a third difference of nearly nothing)
     sp  pointer moves at sub-pixel positions
     rt  times a script read the whole page's text (document.body's innerText or textContent)
     c   the browser: au automation hints it exposes, fp footprints of a browser driven by a program
         (getter: a browser property's getter replaced by a script; headless: a headless window; swgl:
         software rendering), sw/sh screen size, mt touch points
   The server (studies/authenticity.py) clamps every number and drops anything else. The counts start again
   once a form is sent (the next item shown in place is a new page). Described on the consent page. */
(function () {
  "use strict";
  var counts, started, firstAt, hiddenSince, typedFirst, typedLast, path;

  function reset() {
    counts = { pm: 0, pd: 0, tp: 0, k: 0, cl: 0, sc: 0, bl: 0, vh: 0, hm: 0, ps: 0, pc: 0, tc: 0,
      pp: 0, lv: 0, sm: 0, sp: 0, rt: 0 };
    path = [];
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

  var NATIVE = /\{\s*\[native code\]\s*\}\s*$/;
  function isNative(fn) {
    try { return NATIVE.test(Function.prototype.toString.call(fn)); } catch (e) { return false; }
  }
  // Footprints of a browser driven by a program that hides its automation flag: a property's getter replaced
  // by a script (the usual way webdriver is hidden), a headless window, software rendering. Read once a page.
  var footprints = null;
  function footprintHints() {
    if (footprints) { return footprints; }
    var hints = [];
    var nav = window.Navigator && Navigator.prototype;
    var replaced = !isNative(Function.prototype.toString);
    try { replaced = replaced || Object.getOwnPropertyNames(navigator).length > 0; } catch (e) { replaced = true; }
    ["webdriver", "plugins", "languages", "platform", "hardwareConcurrency", "userAgent"].forEach(function (name) {
      var d = nav && Object.getOwnPropertyDescriptor(nav, name);
      if (d && d.get && !isNative(d.get)) { replaced = true; }
    });
    if (replaced) { hints.push("getter"); }
    var brands = (navigator.userAgentData && navigator.userAgentData.brands) || [];
    var s = window.screen || {};
    var bare = !navigator.maxTouchPoints && window.outerWidth === window.innerWidth &&
      window.outerHeight === window.innerHeight && s.width === window.innerWidth &&
      s.height === window.innerHeight && s.availHeight === s.height;
    if (bare || brands.some(function (b) { return /headless/i.test(b.brand); })) { hints.push("headless"); }
    try {
      var gl = document.createElement("canvas").getContext("webgl");
      var info = gl && gl.getExtension("WEBGL_debug_renderer_info");
      if (info && /swiftshader|llvmpipe|software/i.test(gl.getParameter(info.UNMASKED_RENDERER_WEBGL))) {
        hints.push("swgl");
      }
    } catch (e) { /* no WebGL: nothing to read */ }
    footprints = hints;
    return hints;
  }

  // The whole page's text read by a script: the page's own code never reads it (browser add-ons run in a world
  // of their own and do not pass here); an agent reading the page through the debugging protocol does.
  function watchRead(proto, name) {
    var d = proto && Object.getOwnPropertyDescriptor(proto, name);
    if (!d || !d.get || !d.configurable) { return; }
    Object.defineProperty(proto, name, {
      configurable: true, enumerable: d.enumerable, set: d.set,
      get: function () {
        if (this === document.body || this === document.documentElement) { counts.rt += 1; }
        return d.get.call(this);
      }
    });
  }
  footprintHints();  // before the watches below replace two getters of our own
  watchRead(window.HTMLElement && HTMLElement.prototype, "innerText");
  watchRead(window.Node && Node.prototype, "textContent");

  // A pointer's path, judged three moves at a time (positions are never kept beyond them, never sent): the
  // same step again is a straight line at constant speed; a third difference of almost nothing a perfectly
  // smooth curve. A hand's path has tremor in it.
  function pathStep(x, y) {
    counts.pp += 1;
    if (x !== Math.round(x) || y !== Math.round(y)) { counts.sp += 1; }
    path.push([x, y]);
    if (path.length > 4) { path.shift(); }
    var n = path.length;
    if (n < 3) { return; }
    var a = path[n - 3], b = path[n - 2], c = path[n - 1];
    var dx = c[0] - b[0], dy = c[1] - b[1];
    var step = Math.sqrt(dx * dx + dy * dy);
    if (step < 0.5) { return; }
    if (Math.abs(dx - (b[0] - a[0])) < 0.01 && Math.abs(dy - (b[1] - a[1])) < 0.01) { counts.lv += 1; return; }
    if (n < 4) { return; }
    var o = path[0];
    var jx = c[0] - 3 * b[0] + 3 * a[0] - o[0], jy = c[1] - 3 * b[1] + 3 * a[1] - o[1];
    if (Math.sqrt(jx * jx + jy * jy) < 0.06 * step + 0.2) { counts.sm += 1; }
  }

  var opts = { capture: true, passive: true };
  document.addEventListener("pointermove", function (event) {
    if (!event.isTrusted || event.pointerType === "touch") { return; }
    var all = event.getCoalescedEvents ? event.getCoalescedEvents() : [];
    if (!all.length) { all = [event]; }
    all.forEach(function (e) { pathStep(e.clientX, e.clientY); });
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
    out.c = { au: automationHints(), fp: footprintHints(), sw: screen.width || 0, sh: screen.height || 0,
      mt: navigator.maxTouchPoints || 0 };
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
