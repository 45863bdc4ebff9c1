// mnemo console: the little a plain HTML form cannot do. Everything works without it, except
// that a running session's transcript then updates only on reload.
(function () {
  "use strict";

  // A session's transcript follows the session live over its event stream. Fragments are
  // rendered (and escaped) by the server.
  var list = document.querySelector("[data-live]");
  if (list && window.EventSource) {
    var state = document.getElementById("live-state");
    var badge = document.getElementById("session-status");
    var source = new EventSource(list.getAttribute("data-live"));
    var say = function (text) { if (state) { state.textContent = text; } };
    source.addEventListener("open", function () { say("Live: new events appear here as they happen."); });
    source.addEventListener("error", function () { say("Connection lost; reconnecting…"); });
    source.addEventListener("entry", function (e) {
      var empty = document.getElementById("transcript-empty");
      if (empty) { empty.remove(); }
      list.insertAdjacentHTML("beforeend", e.data);
    });
    source.addEventListener("status", function (e) {
      if (badge) {
        badge.textContent = e.data;
        badge.className = "status status-" + e.data;
      }
      if (e.data === "terminated") { source.close(); say("The session has ended."); }
    });
  }

  // A page answering a form (a key just minted) takes the address of the plain page it shows,
  // so that reloading it fetches that page instead of sending the form again (which would mint
  // another key and show its secret).
  var answered = document.querySelector("[data-replace-url]");
  if (answered && window.history && window.history.replaceState) {
    window.history.replaceState(null, "", answered.getAttribute("data-replace-url"));
  }

  // Copy buttons (shown only when this script runs).
  document.querySelectorAll("[data-copy]").forEach(function (button) {
    var target = document.getElementById(button.getAttribute("data-copy"));
    if (!target) { return; }
    button.hidden = false;
    button.addEventListener("click", function () {
      var done = function () { button.textContent = "Copied"; };
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(target.textContent).then(done, function () { select(target); });
      } else {
        select(target);
        try { if (document.execCommand("copy")) { done(); } } catch (err) { /* selected for the person to copy */ }
      }
    });
  });

  function select(node) {
    var range = document.createRange();
    range.selectNodeContents(node);
    var sel = window.getSelection();
    sel.removeAllRanges();
    sel.addRange(range);
  }
})();
