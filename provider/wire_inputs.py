"""The engine's wire format, mapped to what the components' type hints say.

A component hosted by the plugin gets its inputs from the engine as a protobuf Struct (pulumi 3.272.0
provider/server.py Construct: rpc.deserialize_properties), where every number is a float, and the SDK's
ComponentProvider.map_input_properties (provider/experimental/component.py) then names them for Python. Two of its
steps lose types our components rely on:
- an `int` property is converted and then overwritten with the raw float (the conversion lacks a `continue`), so a
  YAML program's `epochs: 10` rendered `--epochs 10.0`, which the trainer refuses;
- an array of enums is mapped item by item as objects, so `architectures: [arm64]` became `[{}]`.
ComponentsProvider maps those two (and arrays of integers) from the raw values, and refuses a fractional number
where a whole one is declared, naming the property.
"""

from enum import Enum
from typing import Any, cast

from pulumi.provider.experimental.analyzer import PropertyDefinition, PropertyType
from pulumi.provider.experimental.component import ComponentProvider
from pulumi.errors import InputPropertyError


def _whole(value: Any, path: str) -> Any:
    """A whole float as an int; anything else (an int, an Output, an unknown) as it is."""
    if isinstance(value, float):
        if not value.is_integer():
            raise InputPropertyError(path, f"{path}: {value!r} is not a whole number; use an integer")
        return int(value)
    return value


class ComponentsProvider(ComponentProvider):
    def _enum_of(self, prop: PropertyDefinition) -> type[Enum] | None:
        if not prop.ref:
            return None
        defined = self.get_type_definition(prop)
        if defined is not None and defined.enum:
            return defined.python_type  # type: ignore[return-value]
        return self._external_enum_types.get(prop.ref)

    def _typed(self, prop: PropertyDefinition, raw: Any, mapped: Any, path: str) -> Any:
        if prop.type == PropertyType.INTEGER:
            return _whole(raw, path)
        if isinstance(raw, list) and prop.items is not None:
            enum = self._enum_of(prop.items)
            if enum is not None:
                return [enum(item) for item in raw]
            if prop.items.type == PropertyType.INTEGER:
                return [_whole(item, f"{path}[{index}]") for index, item in enumerate(raw)]
        return mapped

    def map_input_properties(
        self,
        inputs: Any,
        properties: dict[str, PropertyDefinition],
        mapping: dict[str, str],
        component_name: str,
        property_path: str,
    ) -> Any:
        mapped = super().map_input_properties(inputs, properties, mapping, component_name, property_path)
        mapped = cast(dict[str, Any], mapped)
        if not isinstance(inputs, dict):
            return mapped
        for schema_name, prop in properties.items():
            name, raw = mapping[schema_name], inputs.get(schema_name)
            if raw is not None and name in mapped:
                path = f"{property_path}.{schema_name}" if property_path else schema_name
                mapped[name] = self._typed(prop, raw, mapped[name], path)
        return mapped
