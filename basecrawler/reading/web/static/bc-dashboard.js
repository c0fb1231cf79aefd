// basecrawler web view: draws datasette-dashboards' Vega-Lite charts under the
// Content-Security-Policy (no inline script, no eval). The page carries its charts as a JSON
// data block (#bc-charts); the data comes from the same JSON API dashboards.js uses; Vega runs
// with Vega-Embed's expression interpreter (`ast: true`) instead of compiling with Function().
(function () {
  function dataUrl(chart, page) {
    var query = page.query ? "&" + page.query : "";
    return page.base + chart.db + ".json?sql=" + encodeURIComponent(chart.query) + query + "&_shape=objects";
  }

  async function draw(slug, chart, page) {
    var response = await fetch(dataUrl(chart, page));
    var data = await response.json();
    var spec = Object.assign({
      $schema: "https://vega.github.io/schema/vega-lite/v6.json",
      description: chart.title,
      width: "container",
      height: page.full_height ? "container" : 300,
      view: { stroke: null },
      config: { background: "#00000000", line: { point: true } },
      data: { values: data.rows, format: { type: "json" } }
    }, chart.display);
    var element = document.getElementById("chart-" + slug);
    await vegaEmbed(element, spec, { ast: true, renderer: "svg", actions: false });
    if (data.truncated) {
      var tooltip = document.getElementById("chart-tooltip-" + slug);
      if (tooltip) tooltip.style.visibility = "visible";
    }
    element.setAttribute("data-bc-drawn", "1");
  }

  document.addEventListener("DOMContentLoaded", function () {
    var island = document.getElementById("bc-charts");
    if (!island) return;
    var page = JSON.parse(island.textContent);
    page.charts.forEach(function (entry) {
      draw(entry[0], entry[1], page).catch(function (error) {
        var element = document.getElementById("chart-" + entry[0]);
        if (element) element.textContent = "The chart could not be drawn: " + error;
      });
    });
  });
})();
