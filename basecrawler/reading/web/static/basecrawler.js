// basecrawler web view: fold Datasette's column descriptions into a closed <details> so the
// table is the first thing on the page; head each column with the label its record type
// declares (the description's part before " — "), the column name and description as tooltip.
document.addEventListener("DOMContentLoaded", function () {
  document.querySelectorAll("table.rows-and-columns th[data-column-description]").forEach(function (th) {
    var column = th.getAttribute("data-column");
    var description = th.getAttribute("data-column-description");
    var label = description.split(" — ")[0];
    th.title = column + ": " + description;
    var target = th.querySelector("a") || th;
    target.childNodes.forEach(function (node) {
      if (node.nodeType === Node.TEXT_NODE && node.nodeValue.indexOf(column) !== -1) {
        node.nodeValue = node.nodeValue.replace(column, label);
      }
    });
  });
  var list = document.querySelector("dl.column-descriptions");
  if (!list) return;
  var details = document.createElement("details");
  details.className = "bc-column-help";
  var summary = document.createElement("summary");
  summary.textContent = "Column descriptions";
  details.appendChild(summary);
  list.parentNode.insertBefore(details, list);
  details.appendChild(list);
});

// A search page that showed before its counts were counted (a term in many records: the
// summary went on counting, plugins/basecrawler_facets.py) asks the server whether they are
// ready, and then shows them without a reload: it reads the page again (the counts are kept
// now, so that answer is quick) and puts its count line and facets in place of these. A rare
// 1–2 character term whose records were still being searched for reloads the page instead.
(function () {
  var SUMMARY_PATH = "/-/bc-summary";
  var MAX_POLLS = 240;

  function countLine(doc) {
    return doc.querySelector("h3.bc-count");   // templates/table.html: the count line in any language
  }

  function refill() {
    return fetch(location.href, {credentials: "same-origin", cache: "no-store"}).then(function (response) {
      return response.text();
    }).then(function (html) {
      var fresh = new DOMParser().parseFromString(html, "text/html");
      var line = countLine(document);
      if (line && line.hasAttribute("data-still-searching")) {
        location.reload();
        return;
      }
      var freshLine = countLine(fresh);
      if (line && freshLine) line.replaceWith(document.importNode(freshLine, true));
      document.title = fresh.title;
      var timedOut = document.querySelector("p.facets-timed-out");
      var oldFacets = document.querySelector(".facet-results");
      var anchor = timedOut || oldFacets;
      if (!anchor) return;
      [fresh.querySelector("p.facets-timed-out"), fresh.querySelector(".facet-results")].forEach(function (part) {
        if (part) anchor.parentNode.insertBefore(document.importNode(part, true), anchor);
      });
      [timedOut, oldFacets].forEach(function (part) {
        if (part) part.remove();
      });
    });
  }

  function follow() {
    var params = new URLSearchParams(location.search);
    var search = params.get("_search");
    var parts = location.pathname.split("/");
    if (!document.querySelector("p.facets-timed-out") || !search || parts.length !== 3) return;
    var url = SUMMARY_PATH + "/" + parts[1] + "/" + parts[2] + "?_search=" + encodeURIComponent(search);
    var polls = 0;
    function poll() {
      if (++polls > MAX_POLLS) return;
      fetch(url, {credentials: "same-origin", cache: "no-store"}).then(function (response) {
        return response.ok ? response.json() : null;   // not a search the summary covers: stop
      }).then(function (state) {
        if (state && state.ready) return refill();
        if (state) setTimeout(poll, 250);   // the server waited up to a second already
      }).catch(function () {
        setTimeout(poll, 2000);
      });
    }
    poll();
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", follow);
  } else {
    follow();
  }
})();

// "Watch this search" (templates/_watch.html): the copy button puts the command on the
// clipboard; where the clipboard is not offered (a page not served from localhost over http)
// the command is selected for Ctrl+C instead.
document.addEventListener("DOMContentLoaded", function () {
  document.querySelectorAll("button.bc-copy[data-copy]").forEach(function (button) {
    button.addEventListener("click", function () {
      var source = document.getElementById(button.getAttribute("data-copy"));
      if (!source) return;
      var text = button.getAttribute("data-command") || source.textContent;   // the command as one line
      function select() {
        var range = document.createRange();
        range.selectNodeContents(source);
        var selection = window.getSelection();
        selection.removeAllRanges();
        selection.addRange(range);
      }
      function done() {
        button.setAttribute("data-done", "1");
        button.textContent = button.getAttribute("data-copied");
      }
      select();
      if (navigator.clipboard && navigator.clipboard.writeText) {
        navigator.clipboard.writeText(text).then(done, function () {});
      } else if (document.execCommand && document.execCommand("copy")) {
        done();
      }
    });
  });
});
