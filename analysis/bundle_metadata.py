"""The metadata documents of a study's open-science bundle (analysis/bundle.py), each from the same typed tables
(analysis/bundle_tables.py): the Psych-DS `dataset_description.json` (schema.org JSON-LD, its `variableMeasured`
the codebook of every column), the Frictionless `datapackage.json` (a Table Schema per data file, with types,
enums, ranges, required fields and keys), the Croissant 1.0 `croissant.json` (the files with their SHA-256,
a record set per table, the Responsible-AI fields) and `CITATION.cff`."""

from __future__ import annotations

import json
from dataclasses import dataclass

from analysis.bundle_tables import TYPES, Table

CROISSANT_CONTEXT = {
    "@language": "en",
    "@vocab": "https://schema.org/",
    "citeAs": "cr:citeAs",
    "column": "cr:column",
    "conformsTo": "dct:conformsTo",
    "cr": "http://mlcommons.org/croissant/",
    "rai": "http://mlcommons.org/croissant/RAI/",
    "data": {"@id": "cr:data", "@type": "@json"},
    "dataType": {"@id": "cr:dataType", "@type": "@vocab"},
    "dct": "http://purl.org/dc/terms/",
    "examples": {"@id": "cr:examples", "@type": "@json"},
    "extract": "cr:extract",
    "field": "cr:field",
    "fileProperty": "cr:fileProperty",
    "fileObject": "cr:fileObject",
    "fileSet": "cr:fileSet",
    "format": "cr:format",
    "includes": "cr:includes",
    "isLiveDataset": "cr:isLiveDataset",
    "jsonPath": "cr:jsonPath",
    "key": "cr:key",
    "md5": "cr:md5",
    "parentField": "cr:parentField",
    "path": "cr:path",
    "recordSet": "cr:recordSet",
    "references": "cr:references",
    "regex": "cr:regex",
    "repeated": "cr:repeated",
    "replace": "cr:replace",
    "samplingRate": "cr:samplingRate",
    "equivalentProperty": "cr:equivalentProperty",
    "sc": "https://schema.org/",
    "separator": "cr:separator",
    "source": "cr:source",
    "subField": "cr:subField",
    "transform": "cr:transform",
}
LICENCE_URLS = {
    "CC-BY-4.0": "https://creativecommons.org/licenses/by/4.0/",
    "CC-BY-NC-4.0": "https://creativecommons.org/licenses/by-nc/4.0/",
    "CC0-1.0": "https://creativecommons.org/publicdomain/zero/1.0/",
    "ODC-By-1.0": "https://opendatacommons.org/licenses/by/1-0/",
}


@dataclass(frozen=True)
class Description:
    """What the documents say about the bundle (analysis/bundle.py fills it from the study)."""

    slug: str
    title: str
    description: str
    authors: tuple[str, ...]
    licence: str
    version: str  # 1.<amendments>.0: the design's version
    design_sha256: str  # the current design's hash
    created: str  # when the design was first frozen: ISO 8601 in UTC (…Z)
    date: str  # its day, YYYY-MM-DD
    url: str
    keywords: tuple[str, ...]
    privacy: str  # the personal-data policy
    free_text: str  # what free text the bundle holds, or why none
    uses: str
    limitations: str
    biases: str
    collection: str
    parent: dict | None  # a wave's parent: slug, design hash, answers file and its hash


def json_text(value) -> str:
    """The one JSON form every document of the bundle is written in (stable: same value, same bytes)."""
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def dataset_description(about: Description, tables: list[Table]) -> dict:
    """Psych-DS: schema.org Dataset with every column of every data file in `variableMeasured`."""
    variables: dict[str, dict] = {}
    for table in tables:
        for column in table.columns:
            if column.name in variables:
                continue
            variable = {"@type": "PropertyValue", "name": column.name, "description": column.description}
            if column.minimum is not None:
                variable["minValue"] = column.minimum
            if column.maximum is not None:
                variable["maxValue"] = column.maximum
            if column.enum is not None:
                variable["valueReference"] = [{"@type": "PropertyValue", "value": v} for v in column.enum]
            variables[column.name] = variable
    out = {
        "@context": "https://schema.org/",
        "@type": "Dataset",
        "name": about.title,
        "description": f"{about.description} {about.free_text} {about.privacy}",
        "author": [{"@type": "Person", "name": name} for name in about.authors],
        "license": LICENCE_URLS.get(about.licence, about.licence),
        "version": about.version,
        "identifier": f"sha256:{about.design_sha256}",
        "datePublished": about.date,
        "keywords": list(about.keywords),
        "url": about.url,
        "variableMeasured": list(variables.values()),
    }
    if about.parent:
        out["isBasedOn"] = {
            "@type": "Dataset",
            "name": about.parent["study"],
            "identifier": f"sha256:{about.parent['answers_sha256']}",
            "description": f"The parent study's answers ({about.parent['answers']}); its design's SHA-256 is "
            f"{about.parent['design_sha256']}.",
        }
    return out


def datapackage(about: Description, tables: list[Table], paths: dict[str, str]) -> dict:
    """Frictionless Data Package: one tabular resource per data file, with its Table Schema."""
    return {
        "profile": "tabular-data-package",
        "name": about.slug.lower(),
        "title": about.title,
        "description": about.description,
        "version": about.version,
        "created": about.created,
        "licenses": [{"name": about.licence, "path": LICENCE_URLS.get(about.licence, about.licence)}],
        "contributors": [{"title": name, "role": "author"} for name in about.authors],
        "keywords": list(about.keywords),
        "resources": [
            {
                "name": table.key,
                "title": table.title,
                "description": table.description,
                "path": paths[table.key],
                "profile": "tabular-data-resource",
                "format": "csv",
                "mediatype": "text/csv",
                "encoding": "utf-8",
                "schema": table.schema(),
            }
            for table in tables
        ],
    }


def croissant(about: Description, tables: list[Table], paths: dict[str, str], hashes: dict[str, str]) -> dict:
    """Croissant 1.0: the data files with their SHA-256, a record set per table, the Responsible-AI fields."""
    files = [
        {
            "@type": "cr:FileObject",
            "@id": paths[table.key],
            "name": paths[table.key],
            "description": table.description,
            "contentUrl": paths[table.key],
            "encodingFormat": "text/csv",
            "sha256": hashes[paths[table.key]],
        }
        for table in tables
    ]
    by_key = {table.key: table for table in tables}
    record_sets = []
    for table in tables:
        references = {
            mine[0]: (other, theirs[0]) for mine, other, theirs in table.foreign_keys if other in by_key
        }
        fields = []
        for column in table.columns:
            field = {
                "@type": "cr:Field",
                "@id": f"{table.key}/{column.name}",
                "name": column.name,
                "description": column.description,
                "dataType": TYPES[column.type],
                "source": {"fileObject": {"@id": paths[table.key]}, "extract": {"column": column.name}},
            }
            if column.name in references:
                other, theirs = references[column.name]
                field["references"] = {"field": {"@id": f"{other}/{theirs}"}}
            fields.append(field)
        record_sets.append(
            {
                "@type": "cr:RecordSet",
                "@id": table.key,
                "name": table.key,
                "description": table.description,
                "key": [{"@id": f"{table.key}/{name}"} for name in table.primary_key],
                "field": fields,
            }
        )
    return {
        "@context": CROISSANT_CONTEXT,
        "@type": "sc:Dataset",
        "conformsTo": "http://mlcommons.org/croissant/1.0",
        "name": about.slug,
        "description": f"{about.title}. {about.description}",
        "creator": [{"@type": "sc:Person", "name": name} for name in about.authors],
        "license": LICENCE_URLS.get(about.licence, about.licence),
        "url": about.url,
        "version": about.version,
        "identifier": f"sha256:{about.design_sha256}",
        "datePublished": about.date,
        "keywords": list(about.keywords),
        "citeAs": citation_bibtex(about),
        "distribution": files,
        "recordSet": record_sets,
        "rai:dataCollection": about.collection,
        "rai:dataUseCases": about.uses,
        "rai:dataLimitations": about.limitations,
        "rai:dataBiases": about.biases,
        "rai:personalSensitiveInformation": f"{about.privacy} {about.free_text}",
    }


def citation_bibtex(about: Description) -> str:
    authors = " and ".join(about.authors)
    return (
        f"@misc{{{about.slug.replace('-', '_')}, title = {{{about.title}}}, author = {{{authors}}}, "
        f"year = {{{about.date[:4]}}}, note = {{Data set, version {about.version}, design SHA-256 {about.design_sha256}}}, url = {{{about.url}}}}}"
    )


def citation_cff(about: Description) -> str:
    """CITATION.cff (Citation File Format 1.2.0); strings as JSON, which YAML reads as double-quoted scalars."""
    lines = [
        "cff-version: 1.2.0",
        'message: "If you use this data set, please cite it as below."',
        "type: dataset",
        f"title: {json.dumps(about.title, ensure_ascii=False)}",
        "authors:",
        *(f"  - name: {json.dumps(name, ensure_ascii=False)}" for name in about.authors),
        f"version: {json.dumps(about.version)}",
        f"date-released: {json.dumps(about.date)}",
        "identifiers:",
        "  - type: other",
        f"    value: {json.dumps('sha256:' + about.design_sha256)}",
        '    description: "The SHA-256 of the study\'s frozen design (documentation/design.json)"',
        f"license: {json.dumps(about.licence)}",
        f"url: {json.dumps(about.url)}",
        f"abstract: {json.dumps(about.description, ensure_ascii=False)}",
        "keywords:",
        *(f"  - {json.dumps(keyword)}" for keyword in about.keywords),
    ]
    return "\n".join(lines) + "\n"
